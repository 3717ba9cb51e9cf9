"""`harness compare BASELINE CURRENT`: per phase and metric, the change with its 95% interval and a
verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from harness.cli.errors import fail, guarded
from harness.cli.grouped import examples
from harness.config.metric_registry import metric
from harness.config.units import as_fraction
from harness.errors import EXIT_NO_VERDICT, EXIT_USAGE
from harness.report.comparison import (
    ThresholdOutcome,
    inconclusive_lines,
    render_first,
    render_junit,
    render_markdown,
    render_text,
    untrusted_lines,
    verdict_line,
)
from harness.stats.compare import exit_code
from harness.tools import history
from harness.tools.compare import Noise, Run, compare_sides, how_much, load_side, refusal, tolerances


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


def _named(runs: Sequence[Run], where: str) -> str:
    return f"`{where}` ({len(runs)} run{'s' * (len(runs) > 1)}: {', '.join(r.run_id for r in runs)})"


def _thresholds(runs: Sequence[Run]) -> list[ThresholdOutcome]:
    return [ThresholdOutcome(r.run_id, name, t)
            for r in runs for name, phase in r.phases.items() for t in phase.thresholds]


def _no_baseline_yet(db: Path, scenario: str) -> bool:
    """Nothing to compare with and nothing ever judged bad: the first night of a history. A history whose runs
    were all flagged is not that — starting afresh there would let the regression become the baseline."""
    runs = history.entries(db, scenario) if db.is_file() else []
    return not any(e.good or e.judged_bad for e in runs)


def _write(markdown: Path | None, junit: Path | None, text: str, xml: str) -> None:
    if markdown is not None:
        markdown.write_text(text, encoding="utf-8")
    if junit is not None:
        junit.write_text(xml, encoding="utf-8")


def _first_night(cur: Sequence[Run], named: str, why: str, limits: dict[str, float],
                 thresholds: list[ThresholdOutcome], markdown: Path | None, junit: Path | None) -> None:
    """No baseline yet: this run starts it — unless the client could have moved a central compared figure of
    it (a median, a mean, a rate: a baseline the client shaped would make every later night's verdict its
    own): then no verdict, exit 5. A tail it could have moved stays untrusted, figure by figure, in later
    comparisons."""
    limited = [f"{r.run_id} {name}" for r in cur for name, p in r.phases.items()
               if any(p.untrusted(m) for m in limits if metric(m).central)]
    _write(markdown, junit, render_first(named, thresholds, limited), render_junit([], thresholds=thresholds))
    if limited:
        click.echo(f"no baseline yet, and this run cannot start one: the client limited {', '.join(limited)}", err=True)
        raise SystemExit(EXIT_NO_VERDICT)
    click.echo(f"no baseline yet: {why}: this run starts the baseline")


_EXAMPLES1 = examples(
    'harness compare reports/last-week reports/today --tolerance ttft_p99=10%',
    'harness compare --baseline-from-history 3 reports/today --junit compare.xml',
)


@click.command(short_help="Compare two runs (or two sets of repeats): regressions beyond noise and tolerance.",
               epilog=_EXAMPLES1)
@click.argument("sides", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path),
                metavar="[BASELINE] CURRENT")
@click.option("--baseline-from-history", "from_history", type=click.IntRange(min=1), metavar="N",
              help="Baseline: the last N runs of CURRENT's scenario in the history that may be one (good, or "
                   "accepted; never a flagged regression, a broken threshold or a client-limited run).")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=history.DEFAULT_DB,
              show_default=True, help="The history file, with --baseline-from-history.")
@click.option("--start-baseline", is_flag=True,
              help="With --baseline-from-history: when the history has no run of the scenario that is good and "
                   "none ever judged bad (a first night), say this run starts the baseline and exit 0.")
@click.option("--tolerance", multiple=True, metavar="METRIC=LIMIT",
              help="Override a metric's tolerance, e.g. ttft_p99=10% (error_rate: absolute, 1% = one point).")
@click.option("--markdown", type=click.Path(dir_okay=False, path_type=Path), help="Also write Markdown here.")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), help="Also write JUnit XML here.")
@click.option("--force", is_flag=True, help="Compare even when scenario, workload or phases differ.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@guarded
def compare(sides: tuple[Path, ...], from_history: int | None, db: Path, start_baseline: bool,
            tolerance: tuple[str, ...], markdown: Path | None, junit: Path | None, force: bool, seed: int) -> None:
    """Compare CURRENT with BASELINE, phase by phase: exit 0 when nothing regressed, 99 when something did, 5
    when nothing could be judged at all: every figure was untrusted (the client could have moved it on either
    side), inconclusive or without data. Untrusted figures are shown and named; the others are judged.

    Each is a run directory or a directory of repeated runs (`harness run --repeat`). With three or more runs
    a side the interval comes from the runs; otherwise from a block bootstrap over each run's requests
    (docs/compare.md says why). A regression is worse than its tolerance with the whole interval beyond it.
    The current runs' thresholds are listed too (JUnit: a test case each)."""
    limits = _tolerances(tolerance)
    if len(sides) != (1 if from_history else 2):
        raise click.UsageError("give BASELINE and CURRENT, or --baseline-from-history N and CURRENT")
    if start_baseline and not from_history:
        raise click.BadParameter("goes with --baseline-from-history", param_hint="--start-baseline")
    current = sides[-1]
    cur = load_side(current)
    thresholds = _thresholds(cur)
    if from_history:
        scenario = cur[0].shape["scenario"]
        if start_baseline and _no_baseline_yet(db, scenario):
            _first_night(cur, _named(cur, str(current)), f"no run of {scenario} in {db}", limits, thresholds,
                         markdown, junit)
            return
        base = history.baseline(db, scenario, from_history, exclude=[r.run_id for r in cur])
        baseline = _named(base, f"{db} (last good runs)")
        noise = history.noise(db, scenario, exclude=[r.run_id for r in cur])
    else:
        base = load_side(sides[0])
        baseline = _named(base, str(sides[0]))
        noise = {}
    why = refusal(base, cur)
    if why is not None and not force:
        raise fail(f"not comparable: {why} (--force to compare anyway)", EXIT_USAGE)
    _judge(base, cur, _Said(baseline, _named(cur, str(current)), markdown, junit), limits, seed, noise, thresholds)


@dataclass(frozen=True)
class _Said:
    """Where a comparison is said: the two sides' names, and the files asked for."""

    baseline: str
    current: str
    markdown: Path | None
    junit: Path | None


def _judge(base: list[Run], cur: list[Run], said: _Said, limits: dict[str, float], seed: int, noise: Noise,
           thresholds: list[ThresholdOutcome]) -> None:
    """The sides compared, the table and verdict printed and written; exit 99 on a regression, 5 on no verdict."""
    results = compare_sides(base, cur, limits, seed, noise)
    method = how_much(base, cur, noise)
    click.echo(render_text(results))
    for line in untrusted_lines(results) + inconclusive_lines(results):
        click.echo(line)
    click.echo(f"\nbaseline: {said.baseline}\ncurrent: {said.current}\n{verdict_line(results)} (intervals: {method})")
    _write(said.markdown, said.junit, render_markdown(results, said.baseline, said.current, method, thresholds),
           render_junit(results, thresholds=thresholds))
    code = exit_code(results)
    if code == EXIT_NO_VERDICT:
        click.echo("no verdict: nothing here says whether CURRENT is better or worse", err=True)
    if code:
        raise SystemExit(code)
