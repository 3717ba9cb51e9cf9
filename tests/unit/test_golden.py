"""Golden files: the terminal table and the headline figures of fixed-seed virtual-time runs.

`predict` runs the simulator's engine in virtual time, so its output is the same on every run; a change
in any headline number or in the table's layout shows up here as a short, readable diff. The figures kept
are a curated subset of summary.json (every field is checked by the statistics tests). Regenerate
deliberately with `UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.scenario import load_scenario
from harness.report.table import render_table
from harness.tools.predict import predict
from tests.helpers import check_golden

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
_LATENCIES = ("ttft", "ttft_from_intended", "itl", "tpot", "e2e", "schedule_lag")
_PERCENTILES = ("count", "mean", "p50", "p90", "p99", "max")


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    """The figures a reader of the table would check, per phase, and the conclusion."""
    phases = {}
    for p in summary["phases"]:
        phases[p["name"]] = {
            "requests": {k: p["requests"][k] for k in ("total", "ok", "failed")},
            "window_s": p["window"]["duration_s"],
            "latency_ms": {name: {k: p["latency_ms"][name][k] for k in _PERCENTILES} for name in _LATENCIES},
            "throughput": p["throughput"],
            "goodput_fraction": p["goodput"]["fraction"],
            "tokens": {k: p["tokens"][k] for k in ("output", "input", "estimated", "mismatched")},
            "batch_time_ms_p50": p["batches"]["batch_time_ms"]["p50"] if p["batches"] else None,
            "client_limited": p["client_limited"],
        }
    return {"schema": summary["schema"], "phases": phases, "conclusion": summary["comparison"]["conclusion"]}


@pytest.mark.parametrize("scenario", ["quickstart", "interactive-vs-batch"])
def test_table_and_headline_figures_match_their_golden_files(scenario: str) -> None:
    summary = predict(load_scenario(ROOT / "scenarios" / f"{scenario}.yaml"))
    check_golden(f"{scenario}.table.txt", render_table(summary) + "\n")
    check_golden(f"{scenario}.headline.json", json.dumps(headline(summary.to_json()), indent=2, sort_keys=True) + "\n")


def test_summary_reads_back_into_its_types_unchanged() -> None:
    from harness.stats.schema import Summary

    summary = predict(load_scenario(ROOT / "scenarios" / "interactive-vs-batch.yaml")).to_json()
    typed = Summary.from_json(summary)
    assert typed.to_json() == summary
    assert typed.phases[1].batches is not None and typed.phases[1].batches.count == 3  # batch-8, 3 batches
    with pytest.raises(ValueError, match="colour"):
        Summary.from_json({**summary, "colour": "red"})  # a misspelt field is an error, not ignored
