"""The run directory's `summary.json` and `report.html`, written from a finished summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.records import RequestRecord
from harness.report.html import render_html
from harness.stats.server import Row

if TYPE_CHECKING:
    from harness.run.runner import RunResult


def write_reports(summary: dict[str, Any], run_dir: Path, records: Sequence[RequestRecord],
                  rows: Sequence[Row]) -> None:
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if records:
        (run_dir / "report.html").write_text(render_html(summary, records, rows), encoding="utf-8")


def write_run(result: RunResult) -> None:
    """A finished run's reports beside its records."""
    write_reports(result.summary.to_json(), result.run_dir, result.records, result.server_rows)
