"""`harness export RUN…`: a run's figures in the files other tools ingest (a CSV row per phase; vLLM bench's
`--save-result` JSON per phase)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.records_read import read_run_records, run_dirs
from harness.report.exports import csv_text, write_vllm
from harness.stats.schema import read_summary

_EXAMPLES = examples(
    "harness export reports/20261202T101500Z-quickstart --format csv > runs.csv",
    "harness export reports/* --format csv --output runs.csv",
    "harness export reports/20261202T101500Z-quickstart --format vllm --output results/",
)


@click.command(short_help="A run's figures as CSV, or as vLLM bench's result JSON.", epilog=_EXAMPLES)
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["csv", "vllm"]), default="csv", show_default=True,
              help="csv: one row per phase, columns named as the metric registry (docs/output.md); vllm: one "
                   "JSON file per phase with the keys `vllm bench serve --save-result` writes.")
@click.option("--output", type=click.Path(path_type=Path), metavar="PATH",
              help="csv: a file (default: standard output); vllm: a folder (default: each run's own).")
@guarded
def export(runs: tuple[Path, ...], fmt: Literal["csv", "vllm"], output: Path | None) -> None:
    """Write the figures of RUNS (run folders, or folders of --repeat runs) in a format dashboards read."""
    folders = [run for path in runs for run in run_dirs(path)]
    if fmt == "csv":
        text = csv_text([read_summary(run / "summary.json") for run in folders])
        if output is None:
            click.echo(text, nl=False)
        else:
            output.write_text(text, encoding="utf-8")
            click.echo(f"written: {output}", err=True)
        return
    for run in folders:
        records = list(read_run_records(run))
        for path in write_vllm(read_summary(run / "summary.json"), records, output or run):
            click.echo(f"written: {path}", err=True)
