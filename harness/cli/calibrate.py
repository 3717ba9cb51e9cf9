"""`harness calibrate`: this machine's client against the simulator's ground truth, and its ceiling."""

from __future__ import annotations

from pathlib import Path

import click

from harness import loop as event_loop
from harness.cli.common import Duration, reports_dir_option, writable_dir
from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.gctune import tune_for_timing
from harness.tools.calibrate import calibrate as run_calibration
from harness.tools.calibrate import render
from harness.tools.calibration_store import calibration_path


def _levels(ctx: click.Context, param: click.Parameter, value: str) -> list[int]:
    try:
        counts = [int(x) for x in value.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise click.BadParameter("a comma-separated list of positive integers")
    return counts


_EXAMPLES1 = examples(
    'harness calibrate',
    'harness calibrate --levels 1,64,256 --duration 3s',
)


@click.command(short_help="This machine's client error and ceiling, against the simulator.", epilog=_EXAMPLES1)
@click.option("--levels", default="1,64,256,1024", show_default=True, callback=_levels,
              help="Concurrent streams to try.")
@click.option("--lockstep-levels", default="", callback=lambda c, p, v: _levels(c, p, v) if v else [],
              help="Concurrent streams to try with every user starting at once (waves that end together).")
@click.option("--duration", "seconds", type=Duration(minimum_s=1), default="5s", show_default=True,
              help="Each level's length: 5s, 1m, or seconds.")
@reports_dir_option
@guarded
def calibrate(levels: list[int], lockstep_levels: list[int], seconds: float, reports_dir: Path) -> None:
    """Measure this machine's harness against the simulator's ground truth, and its ceiling."""
    writable_dir(reports_dir, "--reports-dir")
    tune_for_timing()
    report = event_loop.run(run_calibration(levels, seconds, reports_dir, lockstep_levels=tuple(lockstep_levels)))
    click.echo(render(report))
    click.echo(f"\nsaved: {calibration_path()}")
