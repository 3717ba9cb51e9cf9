"""A regression on demand: `simulator.slowdown` (`harness sim serve --slowdown`) makes every engine step that
many times longer, and says so; `sim presets --show` prints the figures a slower device would need."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness.cli import main
from harness.client.backend import Endpoint
from harness.config.scenario import Scenario, parse_scenario
from harness.report.answer import header_facts
from harness.run.display import plan_lines
from harness.tools.predict import predict

SCENARIO = """
name: slow
seed: 3
workload: {prompt_tokens: 512, output_tokens: 64}
simulator: {noise_sigma: 0, slowdown: %s}
phases:
  - name: p
    load: {type: poisson, rate: 4, requests: 40}
"""


def _scenario(slowdown: float) -> Scenario:
    return parse_scenario(yaml.safe_load(SCENARIO % slowdown), "test")


def _lat(slowdown: float) -> dict[str, float | None]:
    phase = predict(_scenario(slowdown)).phases[0]
    return {"itl": phase.latency_ms.itl.p50, "ttft": phase.latency_ms.ttft.p50}


def test_every_step_takes_the_slowdown_times_longer() -> None:
    base, slow = _lat(1.0), _lat(1.2)
    assert slow["itl"] == pytest.approx(1.2 * base["itl"], rel=0.02)  # type: ignore[operator]
    assert slow["ttft"] == pytest.approx(1.2 * base["ttft"], rel=0.10)  # type: ignore[operator]


def test_the_plan_and_the_report_say_the_server_was_slowed() -> None:
    scenario = _scenario(1.2)
    lines = plan_lines(scenario, Endpoint("http://127.0.0.1:1/v1", "m"), True, Path("reports/x"))
    assert "every step 1.2× longer (--slowdown)" in lines[0]
    summary = predict(scenario)
    assert summary.run.simulator is not None and summary.run.simulator.slowdown == 1.2
    assert "1.2× longer" in dict(header_facts(summary))["target"]
    assert "longer" not in plan_lines(_scenario(1), Endpoint("http://h/v1", "m"), True, Path("r"))[0]


def test_a_slowdown_out_of_range_is_refused_naming_the_field() -> None:
    result = CliRunner().invoke(main, ["sim", "serve", "--slowdown", "0"])
    assert result.exit_code == 2 and "slowdown" in result.output


def test_presets_show_prints_one_presets_figures_and_its_rows() -> None:
    result = CliRunner().invoke(main, ["sim", "presets", "--show", "h200"])
    assert result.exit_code == 0, result.output
    assert "h200: accelerator" in result.output and "hbm_tbps: 4.8" in result.output and "--slowdown" in result.output
    rows = [line for line in result.output.splitlines() if line.startswith("h")]
    assert rows and all(line.startswith("h200") for line in rows[1:])
    model = CliRunner().invoke(main, ["sim", "presets", "--show", "llama-3.1-8b"])
    assert "layers: 32" in model.output and "kv_heads: 8" in model.output
    bad = CliRunner().invoke(main, ["sim", "presets", "--show", "h300"])
    assert bad.exit_code == 2 and "--show" in bad.output and "h200" in bad.output
