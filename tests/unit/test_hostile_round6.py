"""Round six's hostile cases (issue 64) that ended in wrong figures with exit 0, each now one line before any load:
a trace row at 1e308 s overflowed the intended send times (TTFT p99 of 9e15 ms, exit 0), `rate: 1e-300` ran
for 15 s and took 854 MB."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness import limits
from harness.config.scenario import parse_scenario
from harness.errors import ScenarioError, TraceError
from harness.workload.traces import read_trace


def scenario(load: dict[str, object]) -> None:
    parse_scenario({"name": "h", "phases": [{"name": "p", "load": load}]}, "test")


@pytest.mark.parametrize("stamp", ["1e308", "-1e308", "9e9"])
def test_a_trace_row_far_in_time_is_refused_naming_the_file(tmp_path: Path, stamp: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
                    f'{{"timestamp": {stamp}, "input_length": 10, "output_length": 5}}\n')
    with pytest.raises(TraceError, match=r"t\.jsonl: its timestamps span .* over the 30 days"):
        read_trace(path, "mooncake")


def test_a_trace_within_a_month_reads() -> None:
    path = Path(__file__).parents[2] / "scenarios" / "traces"
    some = sorted(path.glob("*.jsonl.gz"))
    assert some and read_trace(some[0]).rows  # the shipped traces span hours


@pytest.mark.parametrize(("load", "says"), [
    ({"type": "poisson", "rate": 1e-300, "requests": 2}, "requests / rate is 2e\\+300 s"),
    ({"type": "constant", "rate": 1e-6, "requests": 10}, "over the 30 days"),
    ({"type": "trace", "timestamps": [0, 1e308]}, "timestamps span 1e\\+308 s"),
])
def test_a_phase_that_would_span_past_a_month_is_one_line(load: dict[str, object], says: str) -> None:
    with pytest.raises(ScenarioError, match=says):
        scenario(load)


def test_a_slow_rate_with_a_duration_to_end_it_is_fine() -> None:
    scenario({"type": "poisson", "rate": 1e-6, "requests": 10, "duration_s": 60})
    scenario({"type": "poisson", "rate": 0.01, "requests": 100})  # 10,000 s: under a month


def test_a_lone_surrogate_in_a_dataset_prompt_is_replaced_at_the_door_and_every_request_is_taken(
        tmp_path: Path) -> None:
    """`\\ud800` in a ShareGPT prompt made the request encoder throw: an 88-line traceback, exit 1, no record."""
    import orjson

    from harness.tools.predict import predict_runs
    from harness.workload.datasets import sharegpt_turns

    data = tmp_path / "s.json"
    data.write_text('[{"conversations": [{"from": "human", "value": "hello \\ud800 world"}, '
                    '{"from": "gpt", "value": "hi there"}]}]')
    (turn,) = sharegpt_turns(str(data))
    assert turn.prompt == "hello \ufffd world"
    orjson.dumps(turn.prompt)  # what the request encoder does: no longer throws
    scenario = parse_scenario({"name": "s", "workload": {"dataset": {"type": "sharegpt", "file": str(data),
                                                                      "output_tokens": "reply"}},
                               "phases": [{"name": "p", "load": {"type": "poisson", "rate": 2, "requests": 3}}]},
                              "test")
    _, runs = asyncio.run(predict_runs(scenario))
    assert len(runs[0].records) == 3
    assert all(r.status == "ok" for r in runs[0].records)


def test_a_history_database_that_is_not_one_or_a_cell_the_harness_did_not_write_is_one_line(tmp_path: Path) -> None:
    """`--db` at a file that is not SQLite was a sqlite3.DatabaseError traceback; a `blocks` cell that is not zlib,
    or a zlib bomb (5.3 GB in `compare --baseline-from-history`), or a `shape` that is not JSON, were tracebacks."""
    import zlib

    from click.testing import CliRunner

    from harness.cli import main
    from harness.tools import history

    fake = tmp_path / "notes.txt"
    fake.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(ScenarioError, match=r"notes\.txt: not a history database"):
        history.entries(fake)
    shown = CliRunner().invoke(main, ["history", "show", "--db", str(fake)])
    assert shown.exit_code == 2 and "not a history database" in shown.output and "Traceback" not in shown.output
    for blob, says in ((b"not zlib at all", "not zlib data"),
                       (zlib.compress(b"\0" * (limits.HISTORY_CELL_BYTES + 8)), "inflate past 64 MiB")):
        with pytest.raises(ScenarioError, match=says), history.connect(tmp_path / "h.sqlite"):
            history._unpack(blob)
    with pytest.raises(ScenarioError, match="shape is not JSON"), history.connect(tmp_path / "h.sqlite"):
        history._cell("{not json", "shape")
    values = history._unpack(history._pack(__import__("numpy").array([1.5, 2.5])))
    assert list(values) == [1.5, 2.5]


def test_a_worker_that_floods_its_output_is_kept_to_a_cap_and_the_cut_said(tmp_path: Path) -> None:
    """A `--workers` worker flooding its stdout was copied whole into workers/N.out: 213 MB each, no note."""
    from harness.run.distributed.workers import CappedLog

    path = tmp_path / "0.out"
    with CappedLog(path, cap=1000) as out:
        for _ in range(50):
            out.write(b"x" * 99 + b"\n")
    text = path.read_bytes()
    assert text.startswith(b"x" * 99 + b"\n") and len(text) < 1100
    assert text.rstrip().endswith(b"[harness: output cut at 1,000 bytes; 4,000 more not kept]")
    with CappedLog(tmp_path / "1.out", cap=1000) as quiet:
        quiet.write(b"one line\n")
    assert (tmp_path / "1.out").read_bytes() == b"one line\n"  # under the cap: as written, no note


def test_under_a_file_size_limit_the_records_file_ends_in_a_whole_line(tmp_path: Path) -> None:
    """`ulimit -f 256`, 600 requests: requests.jsonl ended in a torn line at exactly 262,144 bytes. Now every line
    kept is whole (the rest is the writer's `unwritten`, for the rescue), in a child process with the limit set."""
    import subprocess
    import sys

    script = f"""
import resource
from pathlib import Path
from harness.records import RecordWriter, RequestRecord
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
writer = RecordWriter(Path({str(tmp_path / "run")!r}))
for i in range(600):
    writer.write(RequestRecord(request_id=f"r{{i:04d}}-" + "x" * 200, phase="p", index=i,
                               prompt_tokens_requested=8, max_tokens=8, intended_ns=i, sent_ns=i,
                               chunk_ns=[i + 1, i + 2]))
    writer.flush()
writer.close()
print(writer.failure is not None, len(writer.unwritten))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    failed, unwritten = done.stdout.split()
    assert failed == "True" and int(unwritten) > 0
    data = (tmp_path / "run" / "requests.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= 64 * 1024
    lines = data.splitlines()
    assert lines and all(__import__("orjson").loads(line)["status"] == "ok" for line in lines)
    assert len(lines) + int(unwritten) >= 600 - 1  # kept whole, or kept for the rescue


def test_a_summary_with_a_figure_that_is_not_a_number_is_not_written_and_exits_4(tmp_path: Path) -> None:
    """Exit 0 came with `TTFT from intended p99 9,038,904,596,120 ms`: a figure that is not finite now stops the
    summary (exit 4, the figure named) instead of being written."""
    from types import SimpleNamespace

    from harness.errors import EXIT_NOTHING_OK, FigureError
    from harness.report.files import non_finite, write_reports

    assert non_finite({"phases": [{"latency_ms": {"ttft": {"p99": 12.5}}}]}) is None
    assert non_finite({"phases": [{"latency_ms": {"ttft": {"p99": float("inf")}}}]}) == \
        "phases.0.latency_ms.ttft.p99 is inf"
    fake = SimpleNamespace(to_json=lambda: {"phases": [{"throughput": {"tokens_per_s": float("nan")}}]})
    with pytest.raises(FigureError, match=r"summary\.json not written: phases\.0\.throughput\.tokens_per_s is nan") \
            as caught:
        write_reports(fake, tmp_path, [], [])  # type: ignore[arg-type]
    assert caught.value.exit_code == EXIT_NOTHING_OK and not (tmp_path / "summary.json").exists()


def test_under_a_file_size_limit_the_rescue_writes_in_parts_that_each_fit(tmp_path: Path) -> None:
    """`ulimit -f 256`: the rescue folder is under the same limit, so `rescued_to` was None; now the records go in
    parts (requests.jsonl, part-2/, part-3/…) each under the limit, and every record is in one of them."""
    import subprocess
    import sys

    script = f"""
import os, resource, tempfile
from pathlib import Path
os.environ["TMPDIR"] = {str(tmp_path)!r}
tempfile.tempdir = None
from harness.records import RequestRecord
from harness.run.rescue import rescue
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
records = [RequestRecord(request_id=f"r{{i:04d}}-" + "x" * 200, phase="p", index=i, prompt_tokens_requested=8,
                         max_tokens=8, intended_ns=i, sent_ns=i, chunk_ns=[i + 1, i + 2]) for i in range(600)]
print(rescue(records, Path({str(tmp_path / "run-x")!r}), "name: x"))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = Path(done.stdout.strip())
    assert folder.is_dir(), done.stdout
    files = sorted(folder.rglob("requests.jsonl"))
    assert len(files) > 1 and all(f.stat().st_size <= 64 * 1024 for f in files)
    ids = [__import__("orjson").loads(line)["request_id"] for f in files for line in f.read_bytes().splitlines()]
    assert len(ids) == len(set(ids)) == 600


def test_a_trace_line_nested_too_deep_is_a_bad_row_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n' + "[" * 100_000 + "]" * 100_000
                    + "\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: invalid JSON \(JSON nested 100,000 deep"):
        read_trace(path, "mooncake")
    assert len(read_trace(path, "mooncake", skip_bad=True).rows) == 1  # skipped and counted with --skip-bad-rows
