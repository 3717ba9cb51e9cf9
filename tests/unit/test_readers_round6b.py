"""The readers a first fuzzing pass over every door found open (issue 64, after the round's own list): each was a
traceback or an unbounded read, each is now a value or one line."""

from __future__ import annotations

import asyncio
import gzip
import sys
from pathlib import Path

import orjson
import pytest

from harness.errors import ScenarioError, TraceError
from harness.workload.traces import read_trace

AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\n"


@pytest.mark.parametrize(("content", "says"), [
    (AZURE_HEAD.encode() + b'"' + b"x" * 200_000 + b'",1,2\n', r"not CSV \(field larger than field limit"),
    (AZURE_HEAD.encode() + b"\xff\xfe,1,2\n", r":3: not an Azure trace row"),  # was a UnicodeDecodeError traceback
])
def test_a_csv_trace_row_the_csv_reader_refuses_is_a_bad_row(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=says):
        read_trace(path)
    assert len(read_trace(path, skip_bad=True).rows) == 1


def test_a_gzip_trace_of_one_endless_line_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    """A 0.6 MB gzip holding one 600 MB line took 1.27 GB to read (the whole line at once)."""
    import resource

    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b'{"timestamp": 0, "input_length": 10, "output_length": 5}\n')
        for _ in range(200):
            out.write(b"x" * (1 << 20))
        out.write(b'\n{"timestamp": 5, "input_length": 10, "output_length": 5}\n')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceError, match=r"t\.jsonl\.gz:2: a line over 1 MiB"):
        read_trace(path, "mooncake")
    trace = read_trace(path, "mooncake", skip_bad=True)
    assert len(trace.rows) == 2 and trace.skipped == {"bad_rows": 1}
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 100, f"peak memory grew {grown_mib:.0f} MiB reading a 200 MiB line"


def test_a_worker_line_past_its_limit_is_dropped_with_a_note_and_the_rest_read_on() -> None:
    from harness.run.distributed.workers import LocalWorker

    async def lines() -> list[bytes]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import sys; sys.stdout.write('a\\n' + 'x' * 5000 + '\\nb\\n')",
            stdout=asyncio.subprocess.PIPE, limit=1024)
        worker = LocalWorker(0, Path("/nonexistent/r"), proc)
        got = [line async for line in worker.lines()]
        await proc.wait()
        return got

    got = asyncio.run(lines())
    assert got[0] == b"a\n" and got[-1] == b"b\n"
    assert any(line.startswith(b"[harness: a line over") for line in got)


def test_a_clock_that_answers_something_else_is_a_value_error(tmp_path: Path) -> None:
    import http.server
    import threading

    from harness.run.distributed.clockref import measure

    answers = iter([b"[" * 100_000, b'{"time_ns": "soon"}', b"{}"])

    class Odd(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = next(answers)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for _ in range(3):
            with pytest.raises(ValueError):
                measure(f"http://127.0.0.1:{server.server_address[1]}/", rounds=1)
    finally:
        server.shutdown()
        server.server_close()


def test_a_calibration_file_that_is_not_one_is_as_if_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.tools import calibration_store

    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration_store, "calibration_path", lambda: path)
    for text in ("[" * 100_000, "[1, 2]", '{"machine": NaN}', "\udcff"):
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        assert calibration_store.load_calibration() is None


def test_a_run_whose_scenario_yaml_is_hostile_is_one_line_in_compare(tmp_path: Path) -> None:
    import json

    from harness.config.scenario import parse_scenario
    from harness.tools.compare import load_runs
    from harness.tools.predict import predict

    summary = predict(parse_scenario({"name": "r", "workload": {"prompt_tokens": 16, "output_tokens": 4}, "phases": [
        {"name": "p", "load": {"type": "poisson", "rate": 5, "requests": 5}}]}, "test"))
    for text, says in (("[" * 10_000, "nested too deep"), ("- just\n- a list\n", "holds no scenario")):
        run = tmp_path / f"run{len(text)}"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(summary.to_json()))
        (run / "scenario.yaml").write_text(text)
        (run / "requests.jsonl").write_bytes(b"")
        with pytest.raises(ScenarioError, match=says):
            load_runs([run])


def test_orjson_stays_within_its_own_limits() -> None:
    """The records door leans on orjson for depth and non-finite numbers: if a release changed that, the record
    door would need its own guards."""
    for text in (b"[" * 2000 + b"]" * 2000, b"[NaN]", b"[1e400]"):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(text)
