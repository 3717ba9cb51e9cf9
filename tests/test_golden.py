"""Golden files: the terminal table and summary.json of fixed-seed virtual-time runs.

`predict` runs the simulator's engine in virtual time, so its output is the same on every run; a change
in any number or in the table's layout shows up here as a diff. Regenerate deliberately with
`UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.report.table import render_table
from harness.scenario import load_scenario
from harness.sim.predict import predict

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed; if intended, regenerate with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("scenario", ["quickstart", "interactive-vs-batch"])
def test_table_and_summary_match_their_golden_files(scenario: str) -> None:
    summary = predict(load_scenario(ROOT / "scenarios" / f"{scenario}.yaml"))
    _check(f"{scenario}.table.txt", render_table(summary) + "\n")
    _check(f"{scenario}.summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
