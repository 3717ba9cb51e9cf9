"""`harness report RUN_DIR`: statistics, table and conclusion rebuilt offline from saved records."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import ECHO, guarded, warn
from harness.cli.grouped import examples
from harness.report.files import write_reports
from harness.report.html import render_html
from harness.report.notes import notes
from harness.report.offline import rebuild
from harness.report.table import print_table
from harness.stats.schema import read_summary

_EXAMPLES1 = examples(
    'harness report reports/20261202T101500Z-quickstart',
    'harness report reports/20261202T101500Z-quickstart --write',
)


@click.command(short_help="Rebuild a run's summary, table and report from its records.", epilog=_EXAMPLES1)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--write/--no-write", default=None,
              help="Rewrite the run's summary.json and report.html (default: only when the run left none).")
@guarded
def report(run_dir: Path, write: bool | None) -> None:
    """Rebuild a run's statistics, table and conclusion offline from its saved records. The run's own
    summary.json and report.html are kept unless --write, or unless the run (killed) left none; a missing
    report.html alone is drawn again from the run's own summary."""
    rebuilt = rebuild(run_dir, ECHO)
    summary = rebuilt.summary
    print_table(summary)
    for line in notes(summary):  # what a reader must know beside the table, as the run said it (STOPPED…)
        warn(line)
    if write if write is not None else not (run_dir / "summary.json").exists():
        for line in write_reports(summary, run_dir, rebuilt.records, rebuilt.rows, rebuilt.every):
            warn(line)
        click.echo(f"\nwritten: {run_dir / 'summary.json'}, {run_dir / 'report.html'}")
    elif write is None and not (run_dir / "report.html").exists() and rebuilt.records:
        # The page alone was missing (deleted, or a run that died writing it): drawn from the run's own
        # summary.
        page = render_html(read_summary(run_dir / "summary.json"), rebuilt.records, rebuilt.rows, rebuilt.every)
        (run_dir / "report.html").write_text(page, encoding="utf-8")
        click.echo(f"\nwritten: {run_dir / 'report.html'} (it was missing)")
