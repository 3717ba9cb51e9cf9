"""`harness compare BASELINE CURRENT`: per phase and metric, the change with its 95% interval and a verdict."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import fail, guarded
from harness.config.units import as_fraction
from harness.errors import EXIT_REGRESSION, EXIT_USAGE
from harness.report.comparison import render_junit, render_markdown, render_text, verdict_line
from harness.stats.compare import REPEATS_FOR_RUN_LEVEL
from harness.tools.compare import compare_sides, load_runs, load_side, refusal, tolerances
from harness.tools.history import DEFAULT_DB
from harness.tools.history import baseline as history_baseline


def _tolerances(texts: tuple[str, ...]) -> dict[str, float]:
    given: dict[str, float] = {}
    for text in (part for t in texts for part in t.split(",") if part.strip()):
        metric, sep, limit = text.partition("=")
        try:
            if not sep:
                raise ValueError(f"{text!r}: give METRIC=LIMIT, e.g. ttft_p99=10%")
            given[metric.strip()] = as_fraction(limit.strip())
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--tolerance") from None
    try:
        return tolerances(given)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--tolerance") from None


@click.command(short_help="Compare two runs (or two sets of repeats): regressions beyond noise and tolerance.")
@click.argument("sides", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path),
                metavar="[BASELINE] CURRENT")
@click.option("--baseline-from-history", "from_history", type=click.IntRange(min=1), metavar="N",
              help="Baseline: the last N good runs of CURRENT's scenario in the history (harness history).")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=DEFAULT_DB, show_default=True,
              help="The history file, with --baseline-from-history.")
@click.option("--tolerance", multiple=True, metavar="METRIC=LIMIT",
              help="Override a metric's tolerance, e.g. ttft_p99=10% (error_rate: absolute, 1% = one point).")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path), help="Also write Markdown here.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Also write JUnit XML here.")
@click.option("--force", is_flag=True, help="Compare even when scenario, workload or phases differ.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@guarded
def compare(sides: tuple[Path, ...], from_history: int | None, db: Path, tolerance: tuple[str, ...],
            markdown: Path | None, junit: Path | None, force: bool, seed: int) -> None:
    """Compare CURRENT with BASELINE, phase by phase: exit 0 when nothing regressed, 99 when something did.

    Each is a run directory or a directory of repeated runs (`harness run --repeat`). With three or more runs
    a side the interval comes from the runs; otherwise from a block bootstrap over each run's requests
    (docs/compare.md says why). A regression is worse than its tolerance with the whole interval beyond it."""
    limits = _tolerances(tolerance)
    if len(sides) != (1 if from_history else 2):
        raise click.UsageError("give BASELINE and CURRENT, or --baseline-from-history N and CURRENT")
    current = sides[-1]
    cur = load_side(current)
    if from_history:
        scenario = cur[0].summary["run"]["scenario"]
        base, baseline = load_runs(history_baseline(db, scenario, from_history)), f"{db} (last good runs)"
    else:
        base, baseline = load_side(sides[0]), str(sides[0])
    why = refusal(base, cur)
    if why is not None and not force:
        raise fail(f"not comparable: {why} (--force to compare anyway)", EXIT_USAGE)
    results = compare_sides(base, cur, limits, seed)
    run_level = min(len(base), len(cur)) >= REPEATS_FOR_RUN_LEVEL
    method = (f"Welch t over runs ({len(base)} vs {len(cur)})" if run_level else
              "block bootstrap over time windows of each run (1,000 resamples)")
    click.echo(render_text(results))
    click.echo(f"\n{verdict_line(results)} (intervals: {method})")
    if markdown is not None:
        markdown.write_text(render_markdown(results, baseline, str(current), method), encoding="utf-8")
    if junit is not None:
        junit.write_text(render_junit(results), encoding="utf-8")
    if any(p.result.verdict == "regression" for p in results):
        raise SystemExit(EXIT_REGRESSION)
