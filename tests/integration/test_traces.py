"""Trace readers on the real public traces in ../shared/traces, and on small hand-made files."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import load_scenario, parse_scenario
from harness.errors import ScenarioError, TraceError
from harness.workload.plan import OpenLoopPlan, plan_phase
from harness.workload.traces import ColumnMap, read_trace, rescale, window
from tests.helpers import AZURE_TRACE, MOONCAKE_TRACE, harness

ROOT = Path(__file__).resolve().parents[2]
AZURE = AZURE_TRACE
MOONCAKE = MOONCAKE_TRACE


@pytest.fixture(scope="module")
def azure():
    return read_trace(AZURE)


@pytest.fixture(scope="module")
def mooncake():
    return read_trace(MOONCAKE)


def test_azure_conversation_trace_reads_completely(azure) -> None:
    s = azure.stats()
    assert s["rows"] == 19_366
    assert s["span_s"] == pytest.approx(3501.7, abs=0.05)
    assert s["mean_rate"] == pytest.approx(5.53, abs=0.005)
    assert s["interarrival_cv"] == pytest.approx(1.09, abs=0.005)
    assert s["input_tokens"]["p50"] == 1020
    assert azure.rows[0].arrival_s == 0.0 and (azure.rows[0].input_tokens, azure.rows[0].output_tokens) == (374, 44)
    # 7 fractional digits: the second row is 4.3145790 s after the first (18:15:46.6805900 → :50.9951690).
    assert azure.rows[1].arrival_s == pytest.approx(4.314579, abs=1e-6)


def test_mooncake_conversation_trace_reads_completely(mooncake) -> None:
    s = mooncake.stats()
    assert s["rows"] == 12_031
    assert s["span_s"] == pytest.approx(3537.0, abs=0.01)
    assert s["distinct_arrivals"] == 1_180
    assert all(r.hash_ids is not None and len(r.hash_ids) == -(-r.input_tokens // 512) for r in mooncake.rows)


def test_replayed_schedule_equals_the_trace_timestamps_scaled(mooncake, tmp_path: Path) -> None:
    scenario = parse_scenario({"name": "m", "phases": [{"name": "p", "load": {
        "type": "trace", "file": str(MOONCAKE), "time_scale": 4}}]}, "test")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan)
    expected = np.round(mooncake.arrivals_s / 4 * 1e9).astype(np.int64)
    assert np.array_equal(plan.offsets_ns, expected)
    assert len(np.unique(plan.offsets_ns)) == 1_180  # the bursts every ~3 s survive the replay
    first = plan.specs[0]
    assert (first.prompt_tokens, first.max_tokens) == (6758, 500)
    assert len(first.prompt.split()) == 6758


def test_shared_prefix_blocks_become_shared_prompt_prefixes(mooncake) -> None:
    scenario = parse_scenario({"name": "m", "phases": [{"name": "p", "load": {
        "type": "trace", "file": str(MOONCAKE), "requests": 2}}]}, "test")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan)
    a, b = (s.prompt.split() for s in plan.specs)
    assert mooncake.rows[0].hash_ids[0] == mooncake.rows[1].hash_ids[0] == 0  # type: ignore[index]
    assert a[:512] == b[:512]  # block 0 shared word for word
    assert a[512:1024] != b[512:1024]  # then they part


def test_rescaling_to_a_target_rate_keeps_the_burst_shape(azure) -> None:
    scaled = rescale(azure, 2.0)
    assert scaled.stats()["mean_rate"] == pytest.approx(2.0)
    assert scaled.stats()["interarrival_cv"] == pytest.approx(azure.stats()["interarrival_cv"], rel=1e-9)


def test_window_rebases_and_speeds_up(azure) -> None:
    w = window(azure, start_s=60, end_s=120, time_scale=10)
    assert w.rows[0].arrival_s == 0.0 and w.rows[-1].arrival_s < 6.0
    inside = [r for r in azure.rows if 60 <= r.arrival_s < 120]
    assert len(w.rows) == len(inside)


def test_bad_rows_name_file_and_line_or_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n"
                     b"yesterday,12,3\r\n2023-11-16 18:15:47.1000000,10,5")
    with pytest.raises(TraceError, match=rf"^{path}:3: not an Azure trace row"):
        read_trace(path)
    trace = read_trace(path, skip_bad=True)
    assert len(trace.rows) == 2 and trace.skipped == {"bad_rows": 1}
    assert trace.rows[1].arrival_s == pytest.approx(0.41941)


def test_burstgpt_filters_by_model_and_counts_failed_requests(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,ChatGPT,100,20,120,Conversation log\n6,GPT-4,50,0,50,Conversation log\n"
                    "7.5,GPT-4,80,30,110,API log\n9,ChatGPT,10,0,10,API log\n")
    all_rows = read_trace(path)
    assert [(r.arrival_s, r.input_tokens) for r in all_rows.rows] == [(0.0, 100), (2.5, 80)]
    assert all_rows.skipped == {"failed_requests": 2}
    gpt4 = read_trace(path, model="GPT-4")
    assert [(r.arrival_s, r.output_tokens) for r in gpt4.rows] == [(0.0, 30)]


def test_generic_jsonl_with_column_mapping(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"t": 2000, "in": 10, "out": 3, "conv": "a"}\n{"t": 500, "in": 7, "out": 1, "conv": "b"}\n')
    trace = read_trace(path, "generic", columns=ColumnMap("t", "in", "out", "ms", "conv"))
    assert [(r.arrival_s, r.input_tokens, r.session) for r in trace.rows] == [(0.0, 7, "b"), (1.5, 10, "a")]


def test_trace_scenarios_resolve_files_relative_to_themselves_and_check_they_exist(tmp_path: Path) -> None:
    for name in ("azure-conv", "mooncake-conv", "trace-rescaled"):
        scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        assert Path(scenario.phases[0].load.file).is_file()  # type: ignore[union-attr]
    bad = tmp_path / "s.yaml"
    bad.write_text("name: t\nphases:\n  - name: p\n    load: {type: trace, file: nowhere.csv}\n")
    with pytest.raises(ScenarioError, match=r"phases\[0\].load.file: no such file"):
        load_scenario(bad)
    both = tmp_path / "both.yaml"
    both.write_text(f"name: t\nphases:\n  - name: p\n    load: {{type: trace, file: {AZURE}, timestamps: [0]}}\n")
    with pytest.raises(ScenarioError, match="exactly one of 'file' and 'timestamps'"):
        load_scenario(both)


def test_trace_inspect_and_convert_commands(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["trace", "inspect", str(MOONCAKE)])
    assert result.exit_code == 0
    assert "rows 12,031" in result.output and "distinct arrival instants 1,180" in result.output
    out = tmp_path / "m.jsonl"
    result = CliRunner().invoke(main, ["trace", "convert", str(MOONCAKE), str(out)])
    assert result.exit_code == 0
    back = read_trace(out, "generic", columns=ColumnMap())
    assert back.rows == read_trace(MOONCAKE).rows  # prefix blocks included: a replay shares the same prefixes
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": "soon"}\n')
    result = CliRunner().invoke(main, ["trace", "inspect", str(bad)])
    assert result.exit_code == 2 and f"{bad}:2:" in result.output


@pytest.mark.timing
async def test_replaying_azure_against_the_simulator_delivers_its_lengths_in_order(tmp_path: Path) -> None:
    import asyncio

    from harness.client.backend import Endpoint
    from harness.config.simulator import SimulatorConfig
    from harness.records_read import read_records
    from harness.run.runner import run_scenario
    from harness.run.simulator import bundled_simulator
    from harness.tools.calibrate import ground_truth

    # The first 60 s of the trace at time_scale 10; the simulator in fixed timing (5 ms + 1 ms a
    # token) so even the 1,000-token answers finish in about a second.
    scenario = parse_scenario({"name": "azure60", "phases": [{"name": "replay", "load": {
        "type": "trace", "file": str(AZURE), "end_s": 60, "time_scale": 10}}]}, "test")
    expected = [r for r in read_trace(AZURE).rows if r.arrival_s < 60]
    async with bundled_simulator(SimulatorConfig(timing="fixed", fixed_ttft_ms=5, fixed_itl_ms=1)) as (url, model):
        await asyncio.wait_for(run_scenario(scenario, Endpoint(url, model), tmp_path / "run"), 60)
        records = sorted(read_records(tmp_path / "run" / "requests.jsonl"), key=lambda r: r.index)
        truth = await ground_truth(url, [r.request_id for r in records])
    assert len(records) == len(expected) == 191 and all(r.status == "ok" for r in records)
    seen = [truth[r.request_id] for r in records]
    assert [t["prompt_tokens"] for t in seen] == [row.input_tokens for row in expected]
    assert [t["output_tokens"] for t in seen] == [row.output_tokens for row in expected]
    arrivals = [t["arrival_ns"] for t in seen]
    # In trace order; rows closer than the client's jitter may swap, so order is checked to 2 ms.
    assert all(b - a > -2_000_000 for a, b in itertools.pairwise(arrivals))
    offsets = (np.array(arrivals) - arrivals[0]) / 1e9
    # Generous, for a test process on a shared machine: a moment's stall (another process holding the core)
    # may delay a few arrivals, never the schedule itself.
    off_by = np.abs(offsets - np.array([row.arrival_s / 10 for row in expected]))
    assert np.mean(off_by <= 0.05) >= 0.97 and off_by.max() < 0.5, sorted(off_by)[-5:]


def test_trace_inspect_draws_arrivals_per_second(tmp_path: Path) -> None:
    import matplotlib.image

    png = tmp_path / "arrivals.png"
    result = CliRunner().invoke(main, ["trace", "inspect", str(AZURE), "--png", str(png)])
    assert result.exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(png).shape
    assert (width, height) == (1000, 320)


def test_trace_rows_used_and_skipped_are_in_the_summary(tmp_path: Path, sim_url: str) -> None:
    import json

    proc = harness("run", str(ROOT / "scenarios" / "burstgpt.yaml"), "--endpoint", sim_url,
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = tmp_path.iterdir()
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    assert phase["trace"]["rows"] == 8 and phase["trace"]["skipped"] == {"failed_requests": 1}
    assert phase["requests"]["ok"] == 8


def test_bad_trace_rows_stop_the_run_or_are_skipped_with_the_flag(tmp_path: Path, sim_url: str) -> None:
    import json

    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0,10,2\nbroken,,\n"
                     "2023-11-16 18:15:46.5,12,3\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: bad\nphases:\n  - name: p\n    load: {type: trace, file: t.csv}\n")
    proc = harness("run", *[str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "r1")])
    assert proc.returncode == 2 and f"{trace}:3: not an Azure trace row" in proc.stderr
    assert not (tmp_path / "r1").exists() or not list((tmp_path / "r1").iterdir())  # no half report
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--skip-bad-rows",
                   "--reports-dir", str(tmp_path / "r2"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r2").iterdir()
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    assert phase["trace"]["skipped"] == {"bad_rows": 1} and phase["requests"]["ok"] == 2
