"""`harness history add RUN_DIR`, `harness history accept RUN`, `harness history show`: run summaries and the
figures compare needs, kept in a local SQLite file."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.config.metric_registry import FOLLOWED, having
from harness.report.history import render_history
from harness.tools import history as store

_DB = click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=store.DEFAULT_DB,
                   show_default=True, help="The history file (SQLite; created when missing).")
_SHOWN = tuple(m.name for m in having("shown"))


@click.group(short_help="Keep run summaries in a local SQLite file; show their trends; accept baselines.")
def history() -> None:
    """Run history: `add` a run (or a repeated run's folder), `accept` a flagged one as a baseline, `show` the
    runs and their trends."""


_EXAMPLES1 = examples(
    'harness history add reports/20261202T101500Z-nightly',
    'harness history add reports/20261202T101500Z-nightly --flag "compare: ttft_p99 +40%"',
)


@history.command(epilog=_EXAMPLES1)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_DB
@click.option("--flag", metavar="REASON", help="Flag the runs (e.g. a regression compare found): they are no "
              "baseline until `harness history accept` says so.")
@guarded
def add(run_dir: Path, db: Path, flag: str | None) -> None:
    """Add RUN_DIR (or every run of a `--repeat` folder) to the history, with what `harness compare` needs of
    it: the folder may be deleted afterwards."""
    ids = store.add(db, run_dir, flag)
    click.echo(f"added {len(ids)} run{'s' * (len(ids) > 1)} to {db}{f' (flagged: {flag})' if flag else ''}: "
               f"{', '.join(ids)}")


_EXAMPLES2 = examples(
    'harness history accept 20261202T101500Z-nightly',
)


@history.command(epilog=_EXAMPLES2)
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@_DB
@guarded
def accept(runs: tuple[str, ...], db: Path) -> None:
    """Accept RUN (a run id, or its folder or a `--repeat` folder) as a baseline despite a flag or a broken
    threshold: the new level is the new normal."""
    ids = store.accept(db, runs)
    click.echo(f"accepted {len(ids)} run{'s' * (len(ids) > 1)} as baseline: {', '.join(ids)}")


_EXAMPLES3 = examples(
    'harness history show',
    'harness history show --metric ttft_p99 --html history.html',
)


@history.command(epilog=_EXAMPLES3)
@_DB
@click.option("--scenario", help="Only this scenario's runs.")
@click.option("--metric", "metrics", multiple=True, type=click.Choice(FOLLOWED), metavar="M",
              help=f"A metric to show (repeatable; default {', '.join(_SHOWN)}).")
@click.option("--baseline", "n", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
              help="Mark the last N runs of each scenario that may be a baseline, as compare would take them.")
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the trends as one self-contained HTML page.")
@guarded
def show(db: Path, scenario: str | None, metrics: tuple[str, ...], n: int, html: Path | None) -> None:
    """The runs, oldest first, with their standing and figures per phase: ✓ may be a baseline (★ is in the
    current one), ✗ may not (flagged, thresholds broken, client limited, incomplete or nothing ok)."""
    chosen = list(metrics or _SHOWN)
    runs = store.entries(db, scenario)
    baseline = {e.run_id for name in {e.scenario for e in runs} for e in store.baseline_entries(db, name, n)}
    for entry in runs:
        phases = sorted({phase for phase, _ in entry.figures})
        figures = "  ".join(f"{phase}: " + ", ".join(f"{m} {entry.figures[(phase, m)]:,.4g}" for m in chosen
                                                       if (phase, m) in entry.figures) for phase in phases)
        mark = ("✓" if entry.good else "✗") + ("★" if entry.run_id in baseline else " ")
        tags = "".join(f" {k}={v}" for k, v in entry.labels.items())
        click.echo(f"{mark} {entry.started_at[:19]}  {entry.scenario}  {entry.run_id}{tags}  [{entry.standing}]  "
                   f"{figures}")
    if html is not None:
        html.write_text(render_history(runs, chosen, baseline), encoding="utf-8")
        click.echo(f"trends: {html}")
