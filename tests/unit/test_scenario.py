from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import load_scenario
from harness.config.workload import LengthDist, SharedPrefixDataset, Workload
from harness.errors import ScenarioError
from harness.workload.plan import BatchPlan, OpenLoopPlan, plan_phase
from harness.workload.requests import RequestSource
from tests.helpers import AZURE_TRACE

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
name: t
phases:
  - name: a
    load: {type: poisson, rate: 2, requests: 5}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def _shipped() -> list[object]:
    return [pytest.param(p, id=p.name) for p in sorted((ROOT / "scenarios").glob("*.yaml"))]


@pytest.mark.parametrize("path", _shipped())
def test_shipped_scenarios_load(path: Path) -> None:
    assert load_scenario(path).phases


@pytest.mark.parametrize(("text", "field", "words"), [
    (GOOD + "colour: red\n", "colour", "unknown field"),
    (GOOD.replace("rate: 2", "rate: -2"), "phases[0].load.rate", "-2 req/s: must be more than 0 req/s"),
    (GOOD.replace("rate: 2", "rate: fast"), "phases[0].load.rate", "number"),
    (GOOD.replace("requests: 5", "requestz: 5"), "phases[0].load.requestz", "unknown field"),
    (GOOD.replace(", requests: 5", ""), "phases[0].load", "bound the phase"),
    (GOOD.replace("poisson", "zipf"), "phases[0].load", "zipf"),
    (GOOD + "simulator: {accelerator: tpu9}\n", "simulator.accelerator", "unknown accelerator"),
    (GOOD + "workload: {prompt_tokens: 0}\n", "workload.prompt_tokens", "0 tokens: must be more than 0 tokens"),
    ("name: t\nphases: []\n", "phases", "at least 1"),
    (GOOD + "client: {http: aiohttp, read_window_us: 300}\n", "client", "read_window_us needs http: h1"),
    (GOOD + "client: {read_window_us: 5000}\n", "client.read_window_us", "5,000 µs: must be at most 2,000 µs"),
    (GOOD.replace("poisson, rate: 2", "concurrency, concurrency: 2, think_time_ms: 5"), "phases[0].load",
     "'think_time_ms' is now 'think_s'"),
])
def test_bad_scenarios_name_file_and_field(tmp_path: Path, text: str, field: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {field}: ")
    assert words in message
    assert "\n" not in message


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nphases: [\n  - {\n")
    with pytest.raises(ScenarioError, match=rf"^{path}: line \d+: "):
        load_scenario(path)


def test_cli_exits_2_with_one_line_on_bad_scenario(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "colour: red\n")
    result = CliRunner().invoke(main, ["run", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: colour: unknown field (see docs/scenarios.md for every field)"


def test_cli_exits_2_on_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "nope.yaml" in result.output


def test_cli_exits_2_on_bad_flag(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, GOOD)), "--api", "grpc"])
    assert result.exit_code == 2
    assert "--api" in result.output


def test_cli_exits_3_when_endpoint_unreachable(tmp_path: Path, unused_tcp_port: int) -> None:
    result = CliRunner().invoke(main, ["run", str(write(tmp_path, GOOD)), "--endpoint",
                                       f"http://127.0.0.1:{unused_tcp_port}/v1", "--reports-dir", str(tmp_path)])
    assert result.exit_code == 3
    assert "cannot reach endpoint" in result.output


def test_plans_are_seeded_and_shaped(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD + """
  - name: b
    load: {type: batch, size: 3, batches: 2}
""".replace("phases:\n", "")))
    first = plan_phase(scenario, 0, "run")
    again = plan_phase(scenario, 0, "run")
    assert isinstance(first, OpenLoopPlan) and isinstance(again, OpenLoopPlan)
    assert list(first.offsets_ns) == list(again.offsets_ns)
    assert [s.prompt for s in first.specs] == [s.prompt for s in again.specs]
    assert len({s.request_id for s in first.specs}) == 5
    batches = plan_phase(scenario, 1, "run")
    assert isinstance(batches, BatchPlan)
    assert [len(b) for b in batches.batches] == [3, 3]
    assert [s.batch for s in batches.specs] == [0, 0, 0, 1, 1, 1]
    assert batches.specs[0].prompt != first.specs[0].prompt  # phases do not share prompts


def test_duration_bounded_open_loop_stops_at_the_duration(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD.replace("type: poisson, rate: 2, requests: 5",
                                                          "type: constant, rate: 10, duration_s: 3")))
    plan = plan_phase(scenario, 0, "run")
    assert isinstance(plan, OpenLoopPlan)
    assert len(plan.specs) == 30


def _lengths(tmp_path: Path, prompt: str) -> list[int]:
    path = write(tmp_path, GOOD.replace("requests: 5", "requests: 2000") + f"workload:\n  prompt_tokens: {prompt}\n")
    plan = plan_phase(load_scenario(path), 0, "run")
    assert isinstance(plan, OpenLoopPlan)
    return [s.prompt_tokens for s in plan.specs]


@pytest.mark.parametrize(("dist", "check"), [
    ("{dist: fixed, value: 77}", lambda a: set(a) == {77}),
    ("{dist: uniform, min: 10, max: 20}", lambda a: a.min() == 10 and a.max() == 20 and abs(a.mean() - 15) < 0.5),
    ("{dist: normal, mean: 500, std: 100, min: 300}", lambda a: abs(a.mean() - 500) < 10 and a.min() >= 300),
    ("{dist: lognormal, median: 200, sigma: 1.0, max: 4000}",
     lambda a: abs(np.median(a) - 200) < 20 and a.max() <= 4000),
])
def test_length_distributions_are_seeded_and_clamped(tmp_path: Path, dist: str, check) -> None:
    first = np.array(_lengths(tmp_path, dist))
    assert check(first)
    assert list(first) == _lengths(tmp_path, dist)  # same seed, same lengths


@pytest.mark.parametrize(("workload", "fixed"), [
    (Workload(prompt_tokens=16, output_tokens=128), True),
    (Workload(prompt_tokens=16, output_tokens=LengthDist(dist="fixed", value=77)), True),
    (Workload(prompt_tokens=16, output_tokens=LengthDist(dist="uniform", min=10, max=20)), False),
    (Workload(dataset=SharedPrefixDataset(type="shared_prefix", prefix_tokens=64,
                                          question_tokens=LengthDist(dist="uniform", min=8, max=16))), False),
])
def test_fixed_lengths_build_no_generator_and_the_same_requests(workload: Workload, fixed: bool) -> None:
    source = RequestSource(workload, "p", 0, 3, "run")
    assert source.fixed_lengths is fixed
    drawn = RequestSource(workload, "p", 0, 3, "run")
    object.__setattr__(drawn, "fixed_lengths", False)  # the generator built, as before the shortcut
    assert [source.spec(i) for i in range(40)] == [drawn.spec(i) for i in range(40)]


def test_empirical_lengths_sample_a_trace_column(tmp_path: Path) -> None:
    azure = AZURE_TRACE
    values = np.array(_lengths(tmp_path, f"{{dist: empirical, file: {azure}, column: input, max: 8000}}"))
    assert abs(np.median(values) - 1020) < 80  # the trace's input median
    assert values.max() <= 8000


def test_length_distribution_needs_its_parameters(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "workload:\n  output_tokens: {dist: normal, mean: 10}\n")
    with pytest.raises(ScenarioError, match=r"workload.output_tokens.*'normal' needs 'std'"):
        load_scenario(path)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30.0), ("5m", 300.0), ("500ms", 0.5), ("1.5h", 5400.0),
                                               ("2", 2.0), ("250us", 0.00025)])
def test_durations_take_units_in_yaml(tmp_path: Path, text: str, seconds: float) -> None:
    path = write(tmp_path, f"name: t\nslo: {{ttft_ms: {text}}}\nphases:\n  - name: a\n"
                           f"    load: {{type: poisson, rate: 2, duration_s: {text}}}\n")
    scenario = load_scenario(path)
    assert scenario.phases[0].load.duration_s == pytest.approx(seconds)  # type: ignore[union-attr]
    bare_ms = float(text) if text.isdigit() else seconds * 1e3  # a bare number in a *_ms field is milliseconds
    assert scenario.slo.ttft_ms == pytest.approx(bare_ms)


def test_a_duration_without_a_known_unit_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nphases:\n  - name: a\n    load: {type: poisson, rate: 2, duration_s: 8x}\n")
    with pytest.raises(ScenarioError, match=r"phases\[0\]\.load\.duration_s: '8x' is not a duration \(use 30s"):
        load_scenario(path)
