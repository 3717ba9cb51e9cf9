"""Sweeps: one phase run at a list of rates or concurrencies, and the knee of the resulting curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.scenario import load_scenario, parse_scenario
from harness.errors import ScenarioError
from harness.stats.schema.sweeps import knee
from harness.tools.predict import predict
from tests.helpers import harness

ROOT = Path(__file__).resolve().parents[2]


def test_a_sweep_expands_into_one_phase_per_value() -> None:
    scenario = parse_scenario({"name": "s", "phases": [
        {"name": "open", "load": {"type": "poisson", "rate": 1, "requests": 10}, "sweep": {"rate": [2, 4.5]}},
        {"name": "users", "load": {"type": "concurrency", "concurrency": 1, "requests": 5},
         "sweep": {"concurrency": [1, 8]}},
    ]}, "test")
    assert [p.name for p in scenario.phases] == ["open@rate=2", "open@rate=4.5", "users@concurrency=1",
                                                 "users@concurrency=8"]
    assert [getattr(p.load, "rate", None) for p in scenario.phases[:2]] == [2.0, 4.5]
    assert scenario.phases[3].load.concurrency == 8  # type: ignore[union-attr]
    assert all(p.sweep is None for p in scenario.phases)


@pytest.mark.parametrize(("phase", "message"), [
    ({"name": "b", "load": {"type": "batch", "size": 4}, "sweep": {"rate": [1, 2]}}, "rate sweep needs"),
    ({"name": "p", "load": {"type": "poisson", "rate": 1, "requests": 3}, "sweep": {"concurrency": [1]}},
     "concurrency sweep needs"),
    ({"name": "p", "load": {"type": "poisson", "rate": 1, "requests": 3}, "sweep": {}}, "exactly one of"),
])
def test_bad_sweeps_are_named(phase: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario({"name": "s", "phases": [phase]}, "test")


def test_the_knee_is_the_fastest_point_still_meeting_the_slos() -> None:
    summary = predict(load_scenario(ROOT / "scenarios" / "sweep.yaml"))
    (sweep,) = summary.sweeps
    points, best = sweep.points, sweep.knee
    assert best is not None and best.name == "poisson@rate=40" and best is knee(points)
    assert all(p.goodput.fraction < 0.95 for p in points
               if p.throughput.output_tokens_per_s > best.throughput.output_tokens_per_s)
    # found once: every reader gets the same objects, and summary.json gains no field for them
    assert summary.sweeps is summary.sweeps and "sweeps" not in summary.to_json()
    assert sweep.of == "poisson" and all(p.load_kind == "poisson" for p in points)


def test_sweep_section_in_the_html_report(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: sw\nworkload: {prompt_tokens: 32, output_tokens: 8}\nslo: {ttft_ms: 500}\n"
                        "phases:\n  - name: p\n    load: {type: poisson, rate: 1, requests: 8}\n"
                        "    sweep: {rate: [5, 10]}\n")
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    page = (run_dir / "report.html").read_text()
    assert "<h2>Sweep p</h2>" in page and "capacity under the SLOs: p@rate=10" in page
    # The sweep's curves (TTFT and TPOT against throughput, the knee named); each point's requests.
    assert page.count("title='sweep p: TTFT against output tokens/s; knee: p@rate=10'") == 1
    assert page.count("'each request: TTFT and mean ITL by send time'") == 2
    # The knee marked on both sweep curves and on the first screen's latency–throughput chart, and said there.
    assert page.count('"label":"knee: p@rate=10"') == 3
    assert "Sweep p: capacity under the SLOs p@rate=10" in page


def test_a_sweep_prints_as_one_row_per_point_with_its_capacity() -> None:
    from harness.report.table import render_table

    summary = predict(load_scenario(ROOT / "scenarios" / "sweep.yaml"))
    text = render_table(summary)
    (sweep,) = summary.sweeps
    points, best = sweep.points, sweep.knee
    assert best is not None
    lines = text.splitlines()
    assert lines[0] == "sweep poisson"  # no phase outside the sweep: no side-by-side table of 5 columns
    for p in points:
        row = next(line for line in lines if line.strip().startswith(p.name.partition("@")[2] + " "))
        assert ("✓" if p.goodput.fraction >= 0.95 else "✗") in row
    assert f"Capacity under the SLOs: {best.name} at" in text
