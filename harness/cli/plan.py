"""`harness plan`: which deployment — every colocated and disaggregated deployment of the devices given within
a budget, each one's capacity at the SLOs in virtual time, the Pareto fronts and the cheapest that carries the
target load (docs/fleets.md, "Planning a deployment")."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import get_args

import click

from harness.cli.common import presets_option, scenario_argument, scenario_or_default
from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.cli.predict import comma_list, price_list, slo_limits
from harness.config.fleet import KvLink, Router
from harness.config.load import ConstantLoad, GammaLoad, PoissonLoad
from harness.config.scenario import SLO, Scenario
from harness.devices.catalogue import catalogue
from harness.errors import UsageError
from harness.plan.bound import starts
from harness.plan.front import PlanRow, capacity_front, cheapest, in_words, rows, ttft_front
from harness.plan.page import plan_html
from harness.plan.search import search
from harness.plan.space import deployments
from harness.plan.trial import MOST_REQUESTS, Slos, plan_requests

_EXAMPLES = examples(
    "harness plan scenarios/disaggregated.yaml --devices h100-sxm,a100-80g --budget 8 --target 10",
    "harness plan scenarios/disaggregated.yaml --devices h100-sxm,h200 --price h100-sxm=2.5,h200=3.6 "
    "--budget '$30' --target 12",
)


@click.command(short_help="Which deployment: the cheapest fleet that carries a load within its SLOs.",
               epilog=_EXAMPLES)
@scenario_argument
@presets_option
@click.option("--devices", callback=comma_list, metavar="A,B,...", help="Accelerators to choose among (default: the "
              "scenario's).")
@click.option("--budget", default="8", show_default=True, metavar="N|$X",
              help="At most N devices in a deployment, or $X an hour (with --price).")
@click.option("--price", "prices", callback=price_list, metavar="A=2.5,...", help="Dollars per device-hour.")
@click.option("--target", type=click.FloatRange(min=0, min_open=True), metavar="REQ/S",
              help="The load to carry (default: the first phase's rate).")
@click.option("--slo", callback=slo_limits, metavar="LIMITS",
              help="e.g. ttft=500ms,tpot=50ms (default: the scenario's).")
@click.option("--attainment", type=click.FloatRange(0.5, 1.0), default=0.9, show_default=True,
              help="Share of requests that must be within every SLO (DistServe's goodput: 90%).")
@click.option("--requests", type=click.IntRange(40, 20_000), default=400, show_default=True,
              help="Requests a trial at least: more at a rate whose steady state holds more in flight (the first "
                   "quarter warms the servers up, not judged).")
@click.option("--links", callback=comma_list, default="infiniband", show_default=True, metavar="L,...",
              help=f"KV links for disaggregated deployments: {', '.join(get_args(KvLink))}.")
@click.option("--routers", callback=comma_list, default="least_outstanding", show_default=True, metavar="R,...",
              help=f"Routers for replicas: {', '.join(get_args(Router))}.")
@click.option("--colocated-only", is_flag=True, help="No prefill pools.")
@click.option("--exhaustive", is_flag=True, help="Simulate every deployment, every trial to its end (the "
              "reference the default search is tested against).")
@click.option("--workers", type=click.IntRange(1, 64), help="Processes (default: one a core).")
@click.option("--json", "as_json", is_flag=True, help="Print every deployment's figures as JSON.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the cost–capacity plane, its front and the pick as one HTML page.")
@guarded
def plan(scenario_path: Path | None, devices: list[str] | None, budget: str, prices: dict[str, float],
         target: float | None, slo: SLO | None, attainment: float, requests: int, links: list[str],
         routers: list[str], colocated_only: bool, exhaustive: bool, workers: int | None, as_json: bool,
         html_path: Path | None) -> None:
    """Plan SCENARIO's deployment: every fleet of --devices within --budget, its capacity at the SLOs, the
    front of cost against capacity, and the cheapest that carries --target."""
    scenario = scenario_or_default(scenario_path)
    slos = _slos(slo or scenario.slo, attainment)
    target = target if target is not None else _phase_rate(scenario)
    names = devices or [scenario.simulator.accelerator]
    _known(names, links, routers, prices)
    count, money = _budget(budget, prices)
    base = scenario.simulator
    candidates = deployments(names, count, lambda a, tp: starts(base, a, tp), disaggregated=not colocated_only,
                             links=links, routers=routers, prices=prices, money=money)  # type: ignore[arg-type]
    if not candidates:
        raise UsageError(f"--budget {budget}: no deployment of {', '.join(names)} within it starts {base.model}")
    reqs = plan_requests(scenario, requests)
    began = time.perf_counter()
    measured = search(base, candidates, reqs, slos, prices=prices, target=target, fast=not exhaustive,
                      workers=workers)
    seconds = time.perf_counter() - began
    table = rows(measured, prices, reqs.mean_output)
    if html_path is not None:
        pick = cheapest(table, target) if target is not None else None
        html_path.write_text(plan_html(table, pick, target, "$/h" if prices else "devices",
                                       f"plan: {scenario.name}"), encoding="utf-8")
    if as_json:
        click.echo(json.dumps(_json(table, target, seconds), indent=2))
        return
    simulated = sum(m.capacity is not None for m in measured)
    click.echo(f"plan: {len(candidates)} deployments of {', '.join(names)} within {budget}"
               f"{'' if money is None else ' an hour'}; {simulated} simulated, {len(candidates) - simulated} "
               f"ruled out by their bound; {sum(m.trials for m in measured)} trials in {seconds:.0f} s")
    if any(m.at_capacity is not None and m.at_capacity.sent >= MOST_REQUESTS for m in measured):
        click.echo(f"warning: a trial needed more than {MOST_REQUESTS:,} requests to reach its steady state; those "
                   "capacities may read high", err=True)
    _print(table, target, bool(prices))


def _slos(slo: SLO, attainment: float) -> Slos:
    if slo.ttft_ms is None and slo.tpot_ms is None:
        raise UsageError("plan needs an SLO to find capacity at: the scenario's slo (ttft_ms, tpot_ms) or --slo")
    return Slos(None if slo.ttft_ms is None else slo.ttft_ms / 1e3,
                None if slo.tpot_ms is None else slo.tpot_ms / 1e3, attainment)


def _phase_rate(scenario: Scenario) -> float | None:
    load = scenario.phases[0].load
    return load.rate if isinstance(load, PoissonLoad | GammaLoad | ConstantLoad) else None


def _known(names: list[str], links: list[str], routers: list[str], prices: dict[str, float]) -> None:
    devices = catalogue().devices
    for flag, given, known in (("--devices", names, devices), ("--links", links, get_args(KvLink)),
                               ("--routers", routers, get_args(Router)), ("--price", list(prices), devices)):
        for name in given:
            if name not in known:
                raise UsageError(f"{flag}: unknown {name!r}; known: {', '.join(sorted(known))}")


def _budget(text: str, prices: dict[str, float]) -> tuple[int, float | None]:
    """(devices at most, dollars an hour at most or None) from `--budget`."""
    money = text.startswith("$")
    try:
        value = float(text[1:].removesuffix("/h")) if money else int(text)
    except ValueError:
        raise UsageError(f"--budget {text!r}: give a device count (8) or dollars an hour ($30)") from None
    if money:
        if not prices:
            raise UsageError("--budget: a budget in dollars needs --price for every device")
        return 64, value
    if not 1 <= value <= 64:
        raise UsageError(f"--budget {text}: between 1 and 64 devices")
    return int(value), None


def _print(table: list[PlanRow], target: float | None, priced: bool) -> None:
    unit = "$/h" if priced else "devices"
    click.echo(f"\ncost against capacity (the front: no cheaper deployment carries as much), cost in {unit}")
    click.echo(_lines(capacity_front(table), target))
    if target is not None:
        carried = ttft_front(table)
        if carried:
            click.echo(f"\ncost against TTFT p99 at {target:g} req/s")
            click.echo(_lines(carried, target))
        pick = cheapest(table, target)
        if pick is None:
            click.echo(f"\nnone of them carries {target:g} req/s within the SLOs: a larger --budget")
            return
        click.echo(f"\ncheapest that carries {target:g} req/s: {pick.measured.deployment.text()} "
                   f"({pick.cost:g} {unit}, capacity {pick.measured.capacity:.1f} req/s)")
        for line in in_words(pick, target):
            click.echo(f"  {line}")


def _lines(front: list[PlanRow], target: float | None) -> str:
    out = [f"  {'deployment':<68} {'cost':>7} {'kW':>5} {'req/s':>7} {'tok/s':>8} {'$/Mtok':>7} {'tok/J':>6} "
           f"{'TTFT p99':>9}"]
    for row in front:
        m = row.measured
        ttft = m.at_target.ttft_p99_s if m.at_target is not None else None
        out.append(f"  {m.deployment.text()[:68]:<68} {row.cost:>7.4g} "
                   f"{_f(row.watts, 1e-3, '.1f'):>5} {_f(m.capacity, 1, '.1f'):>7} "
                   f"{_f(row.output_tokens_per_s, 1, ',.0f'):>8} {_f(row.usd_per_m_tokens, 1, '.2f'):>7} "
                   f"{_f(row.tokens_per_joule, 1, '.2f'):>6} {_f(ttft, 1e3, '.0f') + ' ms' if ttft else '—':>9}")
    return "\n".join(out)


def _f(value: float | None, scale: float, spec: str) -> str:
    return "—" if value is None else format(value * scale, spec)


def _json(table: list[PlanRow], target: float | None, seconds: float) -> dict[str, object]:
    return {"target": target, "seconds": round(seconds, 1), "deployments": [
        {"deployment": r.measured.deployment.text(), "devices": r.measured.deployment.devices, "cost": r.cost,
         "watts": r.watts, "bound": r.measured.bound, "capacity": r.measured.capacity,
         "goodput_tokens_per_s": r.output_tokens_per_s, "usd_per_m_tokens": r.usd_per_m_tokens,
         "tokens_per_joule": r.tokens_per_joule, "trials": r.measured.trials,
         "ttft_p99_at_target_s": r.measured.at_target.ttft_p99_s if r.measured.at_target else None}
        for r in table],
        "capacity_front": [r.measured.deployment.text() for r in capacity_front(table)],
        "cheapest": (pick.measured.deployment.text() if target is not None
                     and (pick := cheapest(table, target)) is not None else None)}
