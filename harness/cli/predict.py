"""`harness predict`: a scenario on its simulated accelerator in virtual time; or on several, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness import loop as event_loop
from harness.cli.common import on_presets, presets_option, scenario_argument, scenario_or_default
from harness.cli.errors import ECHO, guarded
from harness.cli.grouped import examples
from harness.config.scenario import SLO
from harness.devices.formats import WEIGHTS
from harness.report.matrix import matrix_html, render_matrix
from harness.report.table import print_table
from harness.tools.matrix import accelerator_matrix
from harness.tools.predict import predict as run_prediction
from harness.tools.search import parse_slo
from harness.twin.validate import outside_envelope


def comma_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


def price_list(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, float]:
    prices = {}
    for item in filter(None, (part.strip() for part in (value or "").split(","))):
        name, sep, raw = item.partition("=")
        try:
            prices[name] = float(raw.lstrip("$"))
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected ACCELERATOR=DOLLARS_PER_HOUR") from None
        if not sep or prices[name] < 0:
            raise click.BadParameter(f"{item!r}: expected ACCELERATOR=DOLLARS_PER_HOUR")
    return prices


def slo_limits(ctx: click.Context, param: click.Parameter, value: str | None) -> SLO | None:
    try:
        return None if value is None else parse_slo(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_EXAMPLES1 = examples(
    'harness predict scenarios/quickstart.yaml',
    'harness predict scenarios/choose-accelerator.yaml --accelerators h100-sxm,h200 --price h100-sxm=2.5,h200=3.6 '
    '--capacity',
    'harness predict scenarios/quickstart.yaml --accelerators h100-sxm,h100-sxm:fp8,h200:int4 --weights bf16',
)


@click.command(short_help="A scenario on its simulated accelerator, in virtual time.", epilog=_EXAMPLES1)
@scenario_argument
@presets_option
@click.option("--json", "as_json", is_flag=True, help="Print summary.json (or the matrix) instead of the table.")
@click.option("--accelerators", callback=comma_list, metavar="A,B,...",
              help="Run on each of these presets instead, side by side, and say which to choose per phase.")
@click.option("--price", "prices", callback=price_list, metavar="A=2.5,...",
              help="With --accelerators: dollars per device-hour, for the cost of a million output tokens "
                   "within the SLOs (a tp-2 column costs twice).")
@click.option("--slo", callback=slo_limits, metavar="LIMITS",
              help="With --accelerators: e.g. ttft=500ms,tpot=50ms; default: the scenario's slo.")
@click.option("--capacity", is_flag=True,
              help="With --accelerators: also search each for the highest rate of the first open-loop phase "
                   "within the SLOs (harness search, in virtual time).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="With --accelerators: write the matrix and its bar charts as one HTML page.")
@click.option("--weights", type=click.Choice(["auto", *WEIGHTS]), default=None,
              help="The weights' number format (default: the scenario's simulator.weights; auto: the model's "
                   "checkpoint's); with --accelerators, one column may name its own: h100-sxm:fp8,h100-sxm:int4.")
@guarded
def predict(scenario_path: Path | None, as_json: bool, accelerators: list[str] | None, prices: dict[str, float],
            slo: SLO | None, capacity: bool, html_path: Path | None, weights: str | None) -> None:
    """Predict SCENARIO on its simulated accelerator in virtual time: no network, no waiting."""
    scenario = scenario_or_default(scenario_path)
    if weights is not None:
        scenario = scenario.changed(simulator=scenario.simulator.changed(weights=weights))
    if accelerators is None:
        scenario = on_presets(scenario, ECHO)
        if prices or slo or capacity or html_path:
            raise click.UsageError("--price, --slo, --capacity and --html go with --accelerators")
        for line in outside_envelope(scenario):
            click.echo(f"warning: {line}: outside what {scenario.simulator.accelerator!r} was fitted on (an "
                       "extrapolation)", err=True)
        summary = run_prediction(scenario)
        if as_json:
            click.echo(json.dumps(summary.to_json(), indent=2))
        else:
            print_table(summary)
        return
    result = event_loop.run(accelerator_matrix(scenario, accelerators, prices, slo or scenario.slo, capacity,
                                               voice=ECHO))
    if html_path is not None:
        html_path.write_text(matrix_html(result), encoding="utf-8")
    click.echo(json.dumps(result, indent=2) if as_json else render_matrix(result))
