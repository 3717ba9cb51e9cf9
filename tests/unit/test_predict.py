"""Virtual time: queueing theory, and `harness predict` on whole scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import load_scenario, parse_scenario
from harness.devices.catalogue import build_model
from harness.devices.step import StepLoad
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.virtual import run_virtual
from harness.tools.predict import predict
from harness.workload.arrivals import poisson_offsets

ROOT = Path(__file__).resolve().parents[2]
PERF = build_model("h100-sxm", "llama-3.1-8b")


@pytest.mark.parametrize(("max_num_seqs", "rho", "tolerance"), [(1, 0.6, 0.04), (256, 0.3, 0.05)])
def test_mean_ttft_follows_md1_at_low_load(max_num_seqs: int, rho: float, tolerance: float) -> None:
    prompt = 1024
    d = PERF.step_seconds(StepLoad(tokens=prompt, seqs=1, prefill_attn=prompt * prompt / 2))
    rate = rho / d
    offsets = poisson_offsets(rate, 20_000, seed=9)
    reqs = [SimRequest(str(i), prompt, 1, int(t)) for i, t in enumerate(offsets)]
    engine = Engine(PERF, EngineConfig(max_num_seqs=max_num_seqs, kv_blocks=100_000, noise_sigma=0.0,
                                       prefix_caching=False))
    run_virtual(engine, reqs)
    mean_ttft = np.mean([r.token_ns[0] - r.arrival_ns for r in reqs]) / 1e9
    md1 = d + rate * d * d / (2 * (1 - rate * d))  # Pollaczek–Khinchine for deterministic service
    assert mean_ttft == pytest.approx(md1, rel=tolerance)


def test_predict_is_deterministic_and_shows_the_thesis() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    first, second = predict(scenario).to_json(), predict(scenario).to_json()
    assert first == second
    interactive, batch = first["phases"]
    assert interactive["requests"]["ok"] == 60 and batch["requests"]["ok"] == 128
    assert batch["batches"]["count"] == 2
    assert batch["throughput"]["output_tokens_per_s"] > 5 * interactive["throughput"]["output_tokens_per_s"]
    assert interactive["latency_ms"]["ttft"]["p50"] * 10 < batch["latency_ms"]["ttft"]["p50"]
    # 8.3 ms per token at low load (design calibration), about 9 ms with some overlap.
    assert 8.0 < interactive["latency_ms"]["tpot"]["p50"] < 9.5


def test_predict_closed_loop_keeps_concurrency() -> None:
    scenario = parse_scenario({
        "name": "closed", "workload": {"prompt_tokens": 100, "output_tokens": 50},
        "phases": [{"name": "c", "load": {"type": "concurrency", "concurrency": 4, "requests": 40,
                                          "think_s": "100ms"}}],
    }, "test")
    (phase,) = predict(scenario).to_json()["phases"]
    assert phase["requests"]["ok"] == 40
    # Four users, each: ~450 ms per request plus 100 ms thinking, ten requests in a row.
    assert phase["window"]["duration_s"] == pytest.approx(10 * 0.55, rel=0.15)


def test_predict_command_prints_the_table_or_json() -> None:
    result = CliRunner().invoke(main, ["predict", str(ROOT / "scenarios" / "quickstart.yaml")])
    assert result.exit_code == 0
    assert "training-batch" in result.output and "latency p50 / p90 / p99 ms" in result.output
    result = CliRunner().invoke(main, ["predict", "--json", str(ROOT / "scenarios" / "quickstart.yaml")])
    assert json.loads(result.output)["schema"] == "harness.summary/2"


def test_target_offered_sent_and_completed_rates_mean_what_they_say() -> None:
    """Poisson at 50 req/s for 5 s, in virtual time: the target is the scenario's 50; offered is the schedule
    sample's own rate (50 within sampling); sent equals it (a perfect client sends on time); completed counts
    the window that includes draining the last answers, so it is lower."""
    scenario = parse_scenario({"name": "rates", "workload": {"prompt_tokens": 64, "output_tokens": 64},
                               "phases": [{"name": "p", "load": {"type": "poisson", "rate": 50,
                                                                 "duration_s": "5s"}}]}, "test")
    (phase,) = predict(scenario).to_json()["phases"]
    load = phase["load"]
    n = phase["requests"]["total"]
    assert load["target_rps"] == 50.0
    assert abs(load["offered_rps"] - 50.0) < 3 * 50 / n ** 0.5  # three standard errors of a Poisson sample
    assert load["sent_rps"] == pytest.approx(load["offered_rps"], rel=1e-9)
    assert load["completed_rps"] == pytest.approx(n / phase["window"]["duration_s"])
    assert load["completed_rps"] < load["sent_rps"]
