"""The last steps of a run, live or rebuilt offline: server series and the comparison joined to the
summary, then `summary.json` and `report.html` written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.records import RequestRecord
from harness.report.conclusion import comparisons, sentences
from harness.report.html import render_html
from harness.servermetrics import Row, attach_server


def finish_summary(summary: dict[str, Any], rows: Sequence[Row]) -> None:
    attach_server(summary["phases"], rows)
    comps = comparisons(summary)
    summary["comparison"] = {"phases": comps, "conclusion": sentences(comps)}


def write_reports(summary: dict[str, Any], run_dir: Path, records: Sequence[RequestRecord],
                  rows: Sequence[Row]) -> None:
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if records:
        (run_dir / "report.html").write_text(render_html(summary, records, rows), encoding="utf-8")
