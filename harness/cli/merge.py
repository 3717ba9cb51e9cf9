"""`harness merge`: a sharded run's shard directories joined into one run directory."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import ECHO, fail, guarded
from harness.cli.grouped import examples
from harness.errors import EXIT_HARNESS
from harness.report.files import write_run
from harness.report.table import print_table
from harness.run.distributed.merge import merge_shards

_EXAMPLES1 = examples(
    'harness merge shard-0/* shard-1/* --out reports/merged',
)


@click.command(short_help="Join the shards of one run (--shard i/N) into one run directory.", epilog=_EXAMPLES1)
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--out", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The merged run directory to write (records, summary.json, table, report.html).")
@guarded
def merge(run_dirs: tuple[Path, ...], out: Path) -> None:
    """Merge RUN_DIRS, every shard of one run, into --out: records on one clock, statistics computed from all
    of them, each phase client-limited if any shard was."""
    if out.exists() and any(out.iterdir()):
        raise click.BadParameter(f"{out} is not empty", param_hint="--out")
    result = merge_shards(run_dirs, out, ECHO)
    write_run(result, ECHO)
    print_table(result.summary)
    click.echo(f"\nreport: {out}")
    for phase in result.summary.phases:
        if phase.incomplete:
            click.echo(f"warning: phase {phase.name} is incomplete: {phase.incomplete}", err=True)
    cut = [s for s in result.summary.run.shards or [] if not s.complete and s.stopped]
    if cut:
        raise fail("the merged run is incomplete: " + "; ".join(f"shard {s.index}: {s.stopped}" for s in cut),
                   EXIT_HARNESS)
