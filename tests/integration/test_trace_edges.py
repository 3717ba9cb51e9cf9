"""The edges of trace replay found on public traces: over-context rows and client timeouts in predict as in a
run, converted traces that keep their prefix blocks, per-phase prompts, long silences, rescaled rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.scenario import load_scenario, parse_scenario
from harness.errors import ScenarioError
from harness.tools.predict import predict
from harness.workload.plan import OpenLoopPlan, plan_phase
from tests.helpers import AZURE_TRACE, MOONCAKE_TRACE, harness

EDGES = """
name: trace-edges
workload: {ignore_eos: true}
simulator: {accelerator: a100-80g, model: llama-3.1-8b, max_model_len: 16384}
client: {first_token_timeout_s: 0.45}
phases:
  - name: replay
    load: {type: trace, file: slice.jsonl}
"""


@pytest.mark.timing  # each row's fate is a first-token timeout against a prefill time: a starved loop moves both
def test_predict_and_run_agree_on_over_context_rows_and_first_token_timeouts(tmp_path: Path) -> None:
    """Rows of 30,000 tokens exceed the 16k context (400 with the server's sentence); rows of 9,000 take
    ~0.85 s to prefill, past the 0.45 s first-token timeout; short rows answer their first token in ~30-45 ms
    (a busy shared machine has 0.4 s to spare: a 0.25 s timeout once timed one out). Arrivals 1.2 s apart, past
    even a whole long answer, so nothing queues and each row's fate is clear-cut in both."""
    pattern = [300, 30000, 9000, 500]
    rows = [{"timestamp": round(i * 1.2, 3), "input_tokens": pattern[i % 4], "output_tokens": 16} for i in range(8)]
    (tmp_path / "slice.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "edges.yaml"
    path.write_text(EDGES)
    predicted = predict(load_scenario(path)).to_json()["phases"][0]
    proc = harness("run", str(path), "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    real = json.loads((run_dir / "summary.json").read_text())["phases"][0]
    expected = {"ok": 4, "http_error": 2, "timeout": 2}
    for phase in (predicted, real):
        assert {k: v for k, v in phase["requests"]["by_status"].items() if v} == expected
        assert phase["requests"]["failure_reasons"] == {"HTTP 400 invalid_request_error": 2,
                                                        "first token timeout": 2}
        assert phase["trace"]["rows"] == 8
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    refused = [r for r in records if r["status"] == "http_error"]
    assert all("maximum context length is 16384 tokens" in r["message"] for r in refused)


def test_a_converted_mooncake_trace_replays_with_the_same_prefix_hits(tmp_path: Path) -> None:
    converted = tmp_path / "mooncake.jsonl"
    assert harness("trace", "convert", str(MOONCAKE_TRACE), str(converted)).returncode == 0

    def hits(file: Path, fmt: str) -> int:
        scenario = parse_scenario({"name": "m", "seed": 3, "simulator": {"accelerator": "h200",
                                                                         "enable_prompt_tokens_details": True},
                                   "workload": {"cached_share_warning": None},
                                   "phases": [{"name": "p", "load": {"type": "trace", "file": str(file),
                                                                     "format": fmt, "requests": 120}}]}, "test")
        (phase,) = predict(scenario).to_json()["phases"]
        return int(phase["tokens"]["prompt_cached"])

    original = hits(MOONCAKE_TRACE, "mooncake")
    assert original > 50_000  # the trace's reuse reaches the simulator's prefix cache
    assert hits(converted, "generic") == original


def test_two_phases_replaying_the_same_rows_do_not_share_a_cache() -> None:
    load = {"type": "trace", "file": str(MOONCAKE_TRACE), "requests": 60}
    scenario = parse_scenario({"name": "m", "simulator": {"accelerator": "h200"},
                               "workload": {"cached_share_warning": None},
                               "phases": [{"name": "first", "load": load}, {"name": "again", "load": load}]}, "test")
    first, again = predict(scenario).to_json()["phases"]
    # The second phase finds no more in the cache than the first did: its blocks are its own.
    assert again["tokens"]["prompt_cached"] <= first["tokens"]["prompt_cached"] * 1.05
    plans = [plan_phase(scenario, i, "r") for i in (0, 1)]
    assert all(isinstance(p, OpenLoopPlan) for p in plans)
    a, b = (p.specs[0].prompt.split()[:512] for p in plans if isinstance(p, OpenLoopPlan))
    assert a != b


def test_max_idle_s_caps_a_long_silence(tmp_path: Path) -> None:
    rows = [0.0, 1.0, 2.0, 202.0, 203.0]  # a 200 s silence
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"timestamp": t, "input_tokens": 8, "output_tokens": 4})
                                              + "\n" for t in rows))
    scenario = parse_scenario({"name": "idle", "phases": [{"name": "p", "load": {
        "type": "trace", "file": str(tmp_path / "t.jsonl"), "max_idle_s": 5}}]}, "test")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan)
    assert (plan.offsets_ns / 1e9).tolist() == [0.0, 1.0, 2.0, 7.0, 8.0]
    assert plan.trace is not None and plan.trace["idle_capped"] == {"max_idle_s": 5.0, "gaps": 1,
                                                                     "seconds_removed": 195.0}
    (phase,) = predict(scenario).to_json()["phases"]
    assert phase["trace"]["idle_capped"]["gaps"] == 1


def test_target_rate_is_met_over_the_replayed_part() -> None:
    scenario = parse_scenario({"name": "r", "phases": [{"name": "p", "load": {
        "type": "trace", "file": str(AZURE_TRACE), "end_s": 1800, "target_rate": 2, "duration_s": 60}}]}, "test")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan) and plan.trace is not None
    assert len(plan.specs) == 120 and plan.trace["offered_rate"] == pytest.approx(2.0)
    assert plan.offsets_ns[-1] < 60e9


def test_time_scale_with_target_rate_is_refused() -> None:
    with pytest.raises(ScenarioError, match="give 'time_scale' or 'target_rate', not both"):
        parse_scenario({"name": "r", "phases": [{"name": "p", "load": {
            "type": "trace", "file": str(AZURE_TRACE), "time_scale": 2, "target_rate": 2}}]}, "test")
