"""`harness predict`: a scenario on its simulated accelerator in virtual time."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.common import scenario_argument, scenario_or_default
from harness.cli.errors import guarded
from harness.report.table import print_table
from harness.tools.predict import predict as run_prediction


@click.command(short_help="A scenario on its simulated accelerator, in virtual time.")
@scenario_argument
@click.option("--json", "as_json", is_flag=True, help="Print summary.json instead of the table.")
@guarded
def predict(scenario_path: Path | None, as_json: bool) -> None:
    """Predict SCENARIO on its simulated accelerator in virtual time: no network, no waiting."""
    summary = run_prediction(scenario_or_default(scenario_path))
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_table(summary)
