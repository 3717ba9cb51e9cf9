"""Numbers from outside, at the door: finite, in range, and said with the field's unit. `rate: .nan` was "Input
should be less than or equal to 1000000"; `--slo ttft=nanms` a four-line pydantic error inside click's."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import load_scenario
from harness.config.units import number_text, unit_of
from harness.errors import ScenarioError
from harness.tools.search import parse_slo


@pytest.mark.parametrize(("value", "says"), [
    (".nan", "phases[0].load.rate: nan is not a finite number (of req/s)"),
    (".inf", "phases[0].load.rate: inf is not a finite number (of req/s)"),
    ("-.inf", "phases[0].load.rate: -inf is not a finite number (of req/s)"),
    ("1e400", "phases[0].load.rate: 1e400 is not a finite number (of req/s)"),
    ("-3", "phases[0].load.rate: -3 req/s: must be more than 0 req/s"),
    ("2000000", "phases[0].load.rate: 2,000,000 req/s: must be at most 1,000,000 req/s"),
])
def test_a_scenario_number_out_of_range_is_said_with_its_unit(tmp_path: Path, value: str, says: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nphases:\n  - name: p\n    load: {{type: poisson, rate: {value}, requests: 2}}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == f"{path}: {says}"


@pytest.mark.parametrize(("text", "says"), [
    ("ttft=nanms", "ttft: 'nanms' is not a duration (use 30s, 5m, 500ms, or a number of milliseconds)"),
    ("ttft=infms", "ttft: 'infms' is not a duration (use 30s, 5m, 500ms, or a number of milliseconds)"),
    ("ttft=1e400ms", "ttft: '1e400ms' is not a finite duration"),
    ("tpot=0ms", "tpot_ms: 0 ms: must be more than 0 ms"),
])
def test_an_slo_that_is_not_a_finite_duration_is_one_line(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_slo(text)
    assert str(caught.value) == says


def test_the_slo_flag_refuses_nan_in_one_line_with_exit_2() -> None:
    done = CliRunner().invoke(main, ["run", "--endpoint", "http://127.0.0.1:9/v1", "--rate", "2", "--requests", "2",
                                     "--slo", "ttft=1e400ms"])
    assert done.exit_code == 2
    (line,) = [text for text in done.output.splitlines() if text.startswith("Error")]
    assert line == "Error: Invalid value for --slo: ttft: '1e400ms' is not a finite duration"
    assert "pydantic" not in done.output and "validation error" not in done.output


def test_units_and_numbers_read_as_a_person_writes_them() -> None:
    assert [unit_of(f) for f in ("ttft_ms", "duration_s", "rate", "prompt_tokens", "read_window_us", "cv")] == \
        ["ms", "s", "req/s", "tokens", "µs", ""]
    assert [number_text(v) for v in (1_000_000, 2e6, 0.25, 1e-300, -3.0)] == \
        ["1,000,000", "2,000,000", "0.25", "1e-300", "-3"]
    assert number_text(1e20, "tokens") == "1e+20 tokens"
