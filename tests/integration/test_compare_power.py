"""The regression gate's power and false alarms in virtual time (the bundled simulator's engine under `predict`),
at the documented default tolerances. The same checks over real HTTP are `bench/compare_power.py`."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from harness.config.metric_registry import DEFAULT_TOLERANCES
from harness.config.scenario import parse_scenario
from harness.devices.catalogue import catalogue, gpu, use
from harness.stats.compare import Block, blocks, bootstrap
from harness.tools.predict import predict_runs

SLOWER = 1.24  # the accelerator's compute and bandwidth scaled down: decode steps (ITL) about 20% slower
TRIALS = 20


@pytest.fixture(autouse=True)
def slow_accelerator() -> None:
    h100 = gpu("h100-sxm")
    use(catalogue().with_devices(dataclasses.replace(
        h100, name="h100-slower", tflops=h100.tflops / SLOWER, hbm_tbps=h100.hbm_tbps / SLOWER,
        fp8_tflops=(h100.fp8_tflops or h100.tflops) / SLOWER)))


def _side(seed: int, accelerator: str = "h100-sxm") -> list[Block]:
    scenario = parse_scenario({
        "name": "gate", "seed": seed, "workload": {"prompt_tokens": 256, "output_tokens": 64},
        "simulator": {"accelerator": accelerator, "seed": seed},
        "phases": [{"name": "open", "load": {"type": "poisson", "rate": 8, "requests": 60}}]}, "test")
    summary, runs = asyncio.run(predict_runs(scenario))
    window = summary.phases[0].window
    return blocks(runs[0].records, window.start_ns, window.end_ns)


def _flags(base: list[Block], current: list[Block]) -> list[str]:
    return [m for m, tol in DEFAULT_TOLERANCES.items() if bootstrap(m, base, current, tol).verdict == "regression"]


def test_seed_only_differences_raise_no_flag_and_a_slower_decode_is_caught() -> None:
    bases = [_side(100 + k) for k in range(TRIALS + 1)]  # null pairs: neighbours, seeds differing only
    false_alarms = sum(bool(_flags(bases[k], bases[k + 1])) for k in range(TRIALS))
    caught, itl_changes = 0, []
    for trial in range(TRIALS):
        slow = _side(300 + trial, "h100-slower")
        flagged = _flags(bases[trial], slow)
        caught += "itl_p50" in flagged or "tpot_p50" in flagged
        itl_changes.append(bootstrap("itl_p50", bases[trial], slow, 0.05).change)
    assert sum(itl_changes) / TRIALS == pytest.approx(0.20, abs=0.03)  # the slowdown is the one claimed
    assert false_alarms <= 1, f"{false_alarms} of {TRIALS} seed-only pairs flagged"
    assert caught >= 19, f"only {caught} of {TRIALS} slower decodes flagged"
