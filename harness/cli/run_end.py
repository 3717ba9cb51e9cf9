"""How `harness run` ends on the command line: each finished run's files, table and warnings, and the exit
code of the runs taken together (docs/failures.md lists the codes)."""

from __future__ import annotations

import threading
from collections import Counter

import click

from harness.cli.errors import fail
from harness.errors import EXIT_HANGUP, EXIT_HARNESS, EXIT_NOTHING_OK, EXIT_REGRESSION, EXIT_STOPPED
from harness.report.files import write_somewhere
from harness.report.notes import notes
from harness.report.table import print_table
from harness.report.threshold_lines import threshold_lines
from harness.run.exporter import LiveMetrics
from harness.run.result import RunResult
from harness.voice import Voice


def report_run(result: RunResult, died: list[str], display: Voice, metrics: LiveMetrics | None) -> None:
    """A finished run's files, table and warnings; its phases' final client-limited verdicts to the
    exporter."""
    summary = result.summary
    if metrics is not None:
        metrics.verdicts({p.name: p.client_limited for p in summary.phases})
    slow = threading.Timer(1.0, lambda: display.say("writing the report…"))  # said only when it takes a while
    slow.start()
    try:
        result = write_somewhere(result, display)
    finally:
        slow.cancel()
    print_table(summary)
    for line in [*notes(summary), *died]:
        display.warn(line)
    click.echo(f"\nreport: {result.run_dir}")


def exit_of(results: list[RunResult]) -> None:
    """The exit code of the runs taken together: records that missed their folder, stopped, then nothing ok in
    some run, then a broken threshold."""
    lost = next((r.summary.run.records_file for r in results if r.summary.run.records_file is not None
                 and r.summary.run.records_file.failure), None)
    if lost is not None:
        raise fail(f"{lost.failure}; every record is in {lost.rescued_to or 'no folder'}", EXIT_HARNESS)
    if any(r.summary.run.stopped == "SIGHUP" for r in results):
        raise SystemExit(EXIT_HANGUP)
    if any(r.summary.run.stopped for r in results):
        raise SystemExit(EXIT_STOPPED)
    for result in results:
        idle = result.summary.run.complete and not result.summary.phases  # a shard whose share was empty
        if not idle and not any(phase.requests.ok for phase in result.summary.phases):
            causes = Counter[str]()
            for phase in result.summary.phases:
                causes.update(phase.requests.failure_reasons)
            top = ", ".join(f"{reason} ×{n}" for reason, n in causes.most_common(3)) or "no request was sent"
            raise fail(f"no request succeeded ({top})", EXIT_NOTHING_OK)
    broken = [line for r in results for line in threshold_lines(r.summary, failed_only=True)]
    if broken:
        raise fail(f"{len(broken)} threshold{'s' * (len(broken) > 1)} broken: " + "; ".join(
            line.removeprefix("✗ ") for line in broken), EXIT_REGRESSION)
