"""Which step a new request joins: a twin's own rule, honoured by the simulator, and chosen by `sim twin` from its
fitted Poisson load (a twin of vLLM-CPU, whose async scheduling is off, was held to vLLM-GPU's rule and missed a
light Poisson load's TTFT by +48.5%). The "measured" runs here are the simulator's own, in virtual time, on a twin
whose rule is known."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from harness.config.scenario import Scenario, parse_scenario
from harness.devices.catalogue import load_presets
from harness.devices.fitted import FittedAccelerator
from harness.stats.thresholds import observed
from harness.tools.predict import predict, predict_runs
from harness.twin.admission import admission
from harness.twin.fit import Fit
from harness.twin.validate import TTFT_P50

# A CPU engine's shape: 60 ms decode steps, 2 s per 1,000 prompt tokens.
TRUTH = FittedAccelerator("truth", step_ms=20.0, weights_ms=40.0, per_ktoken_ms=2000.0, per_seq_ms=2.0,
                          per_context_ktoken_ms=0.5, kv_tokens=100_000, slots=8)


def poisson(accelerator: str, rate: float = 0.8) -> Scenario:
    return parse_scenario({"name": "light", "seed": 3, "workload": {"prompt_tokens": 128, "output_tokens": 48},
                           "simulator": {"accelerator": accelerator, "noise_sigma": 0.0},
                           "phases": [{"name": "p", "load": {"type": "poisson", "rate": rate, "requests": 40}}]},
                          "test")


def preset(tmp: Path, a: FittedAccelerator) -> str:
    fit = Fit(a, 100, True)
    path = tmp / f"{a.name}.yaml"
    path.write_text(fit.preset_yaml([]), encoding="utf-8")
    load_presets(path)
    return a.name


def measured(tmp: Path, rule: bool, rate: float = 0.8) -> Path:
    """A Poisson run 'measured' on the truth with this rule: its summary and scenario, as a run folder holds them."""
    name = preset(tmp, replace(TRUTH, name=f"truth-{rule}", async_scheduling=rule))
    scenario = poisson(name, rate)
    summary, _ = asyncio.run(predict_runs(scenario))
    where = tmp / f"run-{rule}"
    where.mkdir()
    (where / "summary.json").write_text(summary.model_dump_json(by_alias=True), encoding="utf-8")
    (where / "scenario.yaml").write_text(scenario.to_yaml(), encoding="utf-8")
    return where


def test_a_twin_that_admits_a_step_later_shows_it_in_a_light_poisson_loads_ttft(tmp_path: Path) -> None:
    ttft = {}
    for rule in (False, True):
        name = preset(tmp_path, replace(TRUTH, name=f"t-{rule}", async_scheduling=rule))
        (phase,) = predict(poisson(name)).phases
        ttft[rule] = observed(TTFT_P50.name, phase)
    assert ttft[False] is not None and ttft[True] is not None
    # A request arriving during a busy step waits for the step after next: a step more, a decode step (~60 ms) or
    # one holding another's prompt (~320 ms).
    assert 40 < ttft[True] - ttft[False] < 250


@pytest.mark.parametrize("rule", [False, True])
def test_sim_twin_keeps_the_rule_its_fitted_poisson_load_supports(tmp_path: Path, rule: bool) -> None:
    run = measured(tmp_path, rule)
    fit, finding = admission(Fit(replace(TRUTH, name="twin"), 100, True), tmp_path / "twin.yaml", "twin", [], [run])
    assert fit.accelerator.async_scheduling is rule
    assert finding is not None and finding.code == "admission"
    assert ("after next" in finding.text) is rule
    assert "async_scheduling: " + ("true" if rule else "false") in (tmp_path / "twin.yaml").read_text()


def test_a_load_that_cannot_tell_the_rules_apart_leaves_the_simulators(tmp_path: Path) -> None:
    """Light enough that an arrival rarely meets a busy step: both rules replay it alike."""
    run = measured(tmp_path, False, rate=0.05)
    fit, finding = admission(Fit(replace(TRUTH, name="twin"), 100, True), tmp_path / "twin.yaml", "twin", [], [run])
    assert fit.accelerator.async_scheduling is None
    assert finding is not None and "cannot tell" in finding.text


def test_without_a_poisson_run_the_simulators_rule_stands(tmp_path: Path) -> None:
    fit, finding = admission(Fit(replace(TRUTH, name="twin"), 100, True), tmp_path / "twin.yaml", "twin", [], [])
    assert finding is None and fit.accelerator.async_scheduling is None
    assert "async_scheduling: null" in (tmp_path / "twin.yaml").read_text()
