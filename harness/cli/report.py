"""`harness report RUN_DIR`: statistics, table and conclusion rebuilt offline from saved records."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import guarded, warn
from harness.report.files import write_reports
from harness.report.offline import rebuild
from harness.report.table import print_table


@click.command(short_help="Rebuild a run's summary, table and report from its records.")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--write/--no-write", default=True, show_default=True,
              help="Rewrite the run's summary.json and report.html.")
@guarded
def report(run_dir: Path, write: bool) -> None:
    """Rebuild a run's statistics, table and conclusion offline from its saved records."""
    rebuilt = rebuild(run_dir, warn)
    summary = rebuilt.summary.to_json()
    if write:
        write_reports(summary, run_dir, rebuilt.records, rebuilt.rows)
    print_table(summary)
