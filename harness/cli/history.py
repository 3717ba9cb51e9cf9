"""`harness history add RUN_DIR` and `harness history show`: run summaries kept in a local SQLite file."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import guarded
from harness.report.history import render_history
from harness.stats.repeats import METRICS
from harness.tools import history as store

_DB = click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=store.DEFAULT_DB,
                   show_default=True, help="The history file (SQLite; created when missing).")
_SHOWN = ("ttft_p99", "itl_p50", "output_tokens_per_s", "error_rate")


@click.group(short_help="Keep run summaries in a local SQLite file; show their trends.")
def history() -> None:
    """Run history: `add` a run (or a repeated run's folder), `show` the runs and their trends."""


@history.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_DB
@guarded
def add(run_dir: Path, db: Path) -> None:
    """Add RUN_DIR (or every run of a `--repeat` folder) to the history."""
    ids = store.add(db, run_dir)
    click.echo(f"added {len(ids)} run{'s' * (len(ids) > 1)} to {db}: {', '.join(ids)}")


@history.command()
@_DB
@click.option("--scenario", help="Only this scenario's runs.")
@click.option("--metric", "metrics", multiple=True, type=click.Choice(METRICS), metavar="M",
              help=f"A metric to show (repeatable; default {', '.join(_SHOWN)}).")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the trends as one self-contained HTML page.")
@guarded
def show(db: Path, scenario: str | None, metrics: tuple[str, ...], html: Path | None) -> None:
    """The runs, oldest first, with their figures per phase; failed runs marked ✗."""
    chosen = list(metrics or _SHOWN)
    runs = store.entries(db, scenario)
    for entry in runs:
        phases = sorted({phase for phase, _ in entry.figures})
        figures = "  ".join(f"{phase}: " + ", ".join(f"{m} {entry.figures[(phase, m)]:,.4g}" for m in chosen
                                                       if (phase, m) in entry.figures) for phase in phases)
        click.echo(f"{'✓' if entry.good else '✗'} {entry.started_at[:19]}  {entry.scenario}  {entry.run_id}  {figures}")
    if html is not None:
        html.write_text(render_history(runs, chosen), encoding="utf-8")
        click.echo(f"trends: {html}")
