"""The run directory's `summary.json`, `report.html`, `table.txt` and `README.txt` (what each file holds),
written from a finished summary."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.devices.catalogue import save_used
from harness.errors import FigureError, HarnessError
from harness.records import RequestRecord
from harness.records_read import read_records, record_files
from harness.report.html import render_html
from harness.report.notes import notes
from harness.report.table import render_table
from harness.run.rescue import rescue
from harness.stats.schema import RunHeader, Summary
from harness.stats.server import Row
from harness.voice import Voice

if TYPE_CHECKING:
    from harness.run.result import RunResult


INDEX = {
    "README.txt": "this list",
    "table.txt": "the table, the conclusion and the notes, as printed at the end of the run",
    "summary.json": "every statistic of every phase (fields: docs/summary.md)",
    "report.html": "the table and plots, one self-contained page (opens offline)",
    "requests.jsonl": "one record per request, appended as each ended, token arrival times included",
    "requests.csv": "the same records' scalar columns",
    "requests.parquet": "the same records as one table, token arrival times as a list column",
    "server_metrics.csv": "the endpoint's /metrics, scraped during the run (absent when it had none)",
    "scenario.yaml": "the scenario as run: `harness run scenario.yaml` runs it again",
    "presets.yaml": "the accelerators and models of --presets the run used (absent without): read with it",
}


def non_finite(value: object, where: str = "") -> str | None:
    """The dotted path of the first figure in `value` that is NaN or infinite, with it, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'the summary'} is {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        if (found := non_finite(inner, f"{where}.{key}" if where else str(key))) is not None:
            return found
    return None


def write_reports(summary: Summary, run_dir: Path, records: Sequence[RequestRecord],
                  rows: Sequence[Row], every: int = 1) -> list[str]:
    """summary.json, table.txt, report.html and README.txt; what was not written, said (the page alone may be
    left out: past a file-size limit it was a torn page and a traceback, while the figures fit)."""
    data = summary.to_json()
    if (bad := non_finite(data)) is not None:  # never written, never exit 0: a figure that is not a number
        raise FigureError(f"summary.json not written: {bad}")
    (run_dir / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    said = notes(summary)
    lines = [render_table(summary), *(["", *said] if said else [])]
    (run_dir / "table.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    missed = []
    if records and (why := write_whole(run_dir / "report.html", render_html(summary, records, rows, every))):
        missed.append(f"report.html not written ({why}): summary.json and table.txt hold the figures; "
                      f"`harness report {run_dir}` draws the page where it fits")
    write_index(run_dir, summary.run)
    return missed


def write_whole(path: Path, text: str) -> str | None:
    """`text` in `path` whole, or no file at all; why not (a file-size limit, a full disk), or None."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return exc.strerror or str(exc)
    return None


def write_index(run_dir: Path, run: RunHeader) -> None:
    """README.txt: the files this run directory holds, one line each."""
    said = {name: INDEX[name] for name in INDEX if (run_dir / name).exists() or name == "README.txt"}
    if parts := record_files(run_dir)[1:]:  # a rescue under a file-size limit wrote the records in parts
        said[f"{parts[0].parent.name}/ … {parts[-1].parent.name}/"] = \
            "the rest of the records, in order, each part under the file-size limit (`harness report` reads all)"
    width = max(len(name) for name in said)
    head = f"harness run {run.run_id} of scenario {run.scenario}\n\n"
    body = "".join(f"{name:<{width}}  {what}\n" for name, what in said.items())
    (run_dir / "README.txt").write_text(head + body, encoding="utf-8")


def write_run(result: RunResult, voice: Voice) -> None:
    """A finished run's reports beside its records (and the presets it used, for a merged run)."""
    for line in write_reports(result.summary, result.run_dir, result.records, result.server_rows, result.every):
        voice.warn(line)
    save_used(result.run_dir)


def write_somewhere(result: RunResult, voice: Voice) -> RunResult:
    """The run's reports in its folder or, when that fails (the disk filled or the folder vanished after the
    last record), with every record in a rescue folder, named; a HarnessError when no folder took them."""
    try:
        write_run(result, voice)
        return result
    except OSError as exc:
        reason = exc.strerror or str(exc)
    scenario = result.run_dir / "scenario.yaml"
    # Past records_in_memory, the run holds a sample: the records are its folder's file, if that still reads.
    kept = result.run_dir / "requests.jsonl"
    records = read_records(kept) if result.every > 1 and kept.is_file() else result.records
    rescued = rescue(records, result.run_dir, scenario.read_text(encoding="utf-8") if scenario.is_file() else "")
    voice.warn(f"cannot write the reports to {result.run_dir}: {reason}; "
         + (f"records and reports written to {rescued}" if rescued else "no other folder took them"))
    if rescued is None:
        raise HarnessError(f"the run's reports could not be written anywhere ({reason})")
    result = dataclasses.replace(result, run_dir=rescued)
    try:
        write_run(result, voice)
    except OSError as exc:  # the records are there; the figures did not fit beside them either
        raise HarnessError(f"the run's records are in {rescued}, its reports could not be written there either "
                           f"({exc.strerror or exc}): `harness report {rescued} --write` where they fit") from None
    return result
