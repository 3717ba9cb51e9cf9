"""`harness search`: the highest Poisson rate whose goodput meets the SLOs, with a confidence interval."""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from harness import loop as event_loop
from harness.cli.common import (
    Duration,
    api_key,
    api_key_env_option,
    presets_option,
    reports_dir_option,
    scenario_argument,
    scenario_or_default,
    writable_dir,
)
from harness.cli.errors import ECHO, guarded
from harness.cli.quick_flags import workload_changes
from harness.cli.request_flags import Headers, RequestFlags, endpoint_url, request_options, with_request_flags
from harness.client.backend import Endpoint
from harness.config.quick import length_spec
from harness.config.scenario import SLO, Scenario, parse_scenario
from harness.errors import EXIT_NO_VERDICT, EXIT_STOPPED
from harness.report.files import write_run
from harness.run.display import LineDisplay
from harness.run.run_dir import claimed, new_run_dir
from harness.run.runner import run_scenario
from harness.run.target import target
from harness.stats.capacity import Capacity, SearchTrial
from harness.stats.schema import Summary
from harness.tools.predict import predict_async
from harness.tools.search import (
    MIN_REQUESTS,
    SearchStopped,
    Trial,
    parse_slo,
    planned_trials,
    search,
    trial_seconds,
)
from harness.tools.search_files import write_search
from harness.tools.search_plan import Plan, Search, plan, simulated


def _slo(ctx: click.Context, param: click.Parameter, value: str | None) -> SLO | None:
    if value is None:
        return None
    try:
        return parse_slo(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("search", short_help="The highest rate whose goodput meets the SLOs.")
@scenario_argument
@presets_option
@click.option("--slo", callback=_slo,
              help="Per-request limits, e.g. ttft=500ms,tpot=50ms (ttft_p99=… is read the same way; ttft_answer=…: "
                   "the answer's first token, after any thinking); "
                   "--goodput says what share of requests must meet them. Default: the scenario's slo.")
@click.option("--goodput", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="Share of requests that must meet every SLO (0.99: the SLOs hold at p99).")
@click.option("--low", type=click.FloatRange(min=0.01), default=0.5, show_default=True, help="Lowest rate (req/s).")
@click.option("--high", type=click.FloatRange(min=0.01), default=64.0, show_default=True,
              help="Highest rate (req/s).")
@click.option("--duration", type=Duration(minimum_s=1), default="20s", show_default=True,
              help="Arrivals per trial: 20s, 1m, or seconds.")
@click.option("--repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Seeds to bisect the boundary with (the interval comes from them).")
@click.option("--predict", "virtual", is_flag=True,
              help="Run trials in virtual time on the scenario's simulated accelerator (no network, seconds).")
@click.option("--endpoint", metavar="URL|PATH", help="OpenAI base URL (or a request URL, or with --base-url its "
              "path); default: the bundled simulator, started once.")
@click.option("--base-url", metavar="URL", help="The server (http://host:8000), as vLLM's bench takes it.")
@click.option("--model", help="Model name to request.")
@api_key_env_option
@request_options
@reports_dir_option
@click.option("--steps", type=click.IntRange(1, 20), default=7, show_default=True,
              help="Bisection steps: the capacity to (high − low) / 2^steps.")
@click.option("--near", type=click.FloatRange(min=0, min_open=True), metavar="RATE",
              help="Start from this rate (req/s), stepping up or down by half again until the trials straddle the "
                   "capacity. Default: against the bundled simulator or a twin, its own estimate in virtual time; "
                   "else from --low and --high.")
@click.option("--min-requests", type=click.IntRange(min=1), default=MIN_REQUESTS, show_default=True,
              help="Each trial sends at least this many requests, however low its rate.")
@click.option("--json", "as_json", is_flag=True, help="Print the search result as JSON.")
@click.option("--prompt-tokens", metavar="N|DIST", help="Prompt length of every trial (default: the scenario's), or "
              "a distribution: uniform:128:2048, normal:1000:300, lognormal:512:0.5.")
@click.option("--output-tokens", metavar="N|DIST", help="Answer length of every trial (default: the scenario's).")
@click.option("--tokenizer", metavar="PATH|server|words",
              help="Prompts of exact length on a real model (as `harness run`).")
@guarded
def search_cmd(scenario_path: Path | None, slo: SLO | None, goodput: float, low: float, high: float, duration: float,
               repeats: int, virtual: bool, endpoint: str | None, base_url: str | None, model: str | None,
               api_key_env: str | None, reports_dir: Path, steps: int, near: float | None, min_requests: int,
               as_json: bool, request: RequestFlags, **lengths: Any) -> None:
    """Find the highest Poisson rate whose goodput meets the SLOs, with a confidence interval.

    \b
    Examples:
      harness search --slo ttft=500ms,tpot=50ms --endpoint http://localhost:8000/v1
      harness search --predict --slo ttft=1s --prompt-tokens 1024 --output-tokens 256
    """
    scenario = _with_lengths(scenario_or_default(scenario_path), lengths)
    slo = slo or scenario.slo
    endpoint, api = endpoint_url(endpoint, base_url)
    scenario, headers = with_request_flags(scenario, request, ECHO, api)
    _check(slo, low, high, virtual, endpoint, near)
    writable_dir(reports_dir, "--reports-dir")
    key = api_key(api_key_env, scenario.endpoint.api_key_env)
    bisect = functools.partial(search, slo=slo, goodput=goodput, low=low, high=high, duration_s=duration,
                               steps=steps, repeats=repeats, min_requests=min_requests)
    settings = _Settings(low, high, duration, steps, repeats, min_requests, near)
    if virtual:
        searching = _virtual(_run(scenario, bisect, Plan(near, "--near") if near else Plan(None, "the bounds"),
                                  settings, predict_async, True))
    else:
        where = _Where(endpoint, model, key, headers, reports_dir)
        searching = _on_target(scenario, bisect, settings, where, slo, goodput)
    found, folder = _searched(searching)
    if as_json:
        click.echo(json.dumps(found.to_json(), indent=2))
    else:
        _print(found, goodput, folder)
    if found.untrusted is not None:
        raise SystemExit(EXIT_NO_VERDICT)


@dataclass(frozen=True, slots=True)
class _Where:
    """The endpoint the trials run against (None: the bundled simulator), and where their folders go."""

    endpoint: str | None
    model: str | None
    key: str | None
    headers: Headers
    reports_dir: Path


async def _on_target(scenario: Scenario, bisect: Search, s: _Settings, where: _Where, slo: SLO,
                     goodput: float) -> tuple[Capacity, Path | None]:
    """The search against the endpoint (or one bundled simulator), planned first, in a folder of its own."""
    async with target(scenario, url=where.endpoint, model=where.model, api=None, api_key=where.key,
                      headers=where.headers) as (ep, bundled):
        what = simulated(scenario, bundled)
        if what is not None and s.near is None:  # seconds to minutes before the first trial: said first
            _echo(f"search: estimating the capacity on {what} in virtual time, to start there (--near RATE "
                  "gives one)…")
        the_plan = await plan(scenario, bisect, s.near, what)
        folder = new_run_dir(where.reports_dir, f"{scenario.name}-search")
        began = time.monotonic()
        found = await _run(scenario, bisect, the_plan, s, _on_endpoint(ep, bundled, folder), False)
        write_search(folder, found, slo, goodput, the_plan, (s.low, s.high), the_plan.took_s + time.monotonic() - began)
        return found, folder


@dataclass(frozen=True, slots=True)
class _Settings:
    low: float
    high: float
    duration: float
    steps: int
    repeats: int
    min_requests: int
    near: float | None


def _check(slo: SLO, low: float, high: float, virtual: bool, endpoint: str | None, near: float | None) -> None:
    if not slo.model_dump(exclude_none=True):
        raise click.BadParameter("give the limits to search under (the scenario sets none)", param_hint="--slo")
    if high <= low:
        raise click.BadParameter("must be above --low", param_hint="--high")
    if near is not None and not low <= near <= high:
        raise click.BadParameter(f"{near:g} is outside --low {low:g} … --high {high:g}", param_hint="--near")
    if virtual and endpoint is not None:
        raise click.BadParameter("--predict runs on the scenario's simulated accelerator; drop one of them",
                                 param_hint="--endpoint")


async def _run(scenario: Scenario, bisect: Search, the_plan: Plan, s: _Settings, trial: Trial,
               virtual: bool) -> Capacity:
    """The search, after its plan is said; each trial said as it ends."""
    total = f"~{the_plan.trials}" if the_plan.trials else f"≤{planned_trials(s.steps, s.repeats)}"
    _echo(plan_line(the_plan, s.low, s.high, s.duration, s.steps, s.repeats, s.min_requests, virtual))
    return await bisect(scenario, trial, start=the_plan.start_rps, said=lambda t: _echo(trial_line(t, total)),
                        voice=ECHO)


async def _virtual(searching: Coroutine[Any, Any, Capacity]) -> tuple[Capacity, Path | None]:
    return await searching, None


def _on_endpoint(endpoint: Endpoint, bundled: bool, folder: Path) -> Trial:
    """A trial as a run against the endpoint, in a run folder of its own inside the search's (`trial-01`, …),
    said as it starts and every 10 s while it runs."""
    started = 0

    async def trial(s: Scenario) -> Summary:
        nonlocal started
        started += 1
        run_dir = folder / f"trial-{started:02d}"
        run_dir.mkdir()
        with claimed(run_dir):
            display = LineDisplay(sys.stderr)
            display.say(f"  trial {started}: {s.phases[0].name} req/s …")
            result = await run_scenario(s, endpoint, run_dir, bundled=bundled, display=display)
        write_run(result, display)
        return result.summary

    return trial


def _searched(searching: Coroutine[Any, Any, tuple[Capacity, Path | None]]) -> tuple[Capacity, Path | None]:
    """The search's result; a trial stopped by Ctrl-C or SIGTERM ends it with exit 130, claiming no
    capacity."""
    try:
        return event_loop.run(searching)
    except SearchStopped as stopped:
        click.echo(f"partial: the search was stopped during a trial, after {len(stopped.trials)} whole trials; "
                   "no capacity is claimed from a cut trial (the trials above are in the reports folder)", err=True)
        raise SystemExit(EXIT_STOPPED) from None
    except KeyboardInterrupt:
        click.echo("partial: the search was stopped between trials; no capacity is claimed", err=True)
        raise SystemExit(EXIT_STOPPED) from None


def _with_lengths(scenario: Scenario, lengths: dict[str, str | None]) -> Scenario:
    """The scenario with the workload flags given (`--prompt-tokens`, `--output-tokens`; `--tokenizer` as
    `harness run` takes it)."""
    update: dict[str, Any] = {}
    for name in ("prompt_tokens", "output_tokens"):
        if (text := lengths.get(name)) is not None:
            try:
                update[name] = length_spec(text)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint=f"--{name.replace('_', '-')}") from None
    if update:
        data = scenario.model_dump(mode="json")
        data["workload"] = {**data["workload"], **update}
        scenario = parse_scenario(data, "flags")
    tokenized = workload_changes(scenario, lengths.get("tokenizer"), skip_bad_rows=False)
    return scenario.changed(**tokenized) if tokenized else scenario


def plan_line(the_plan: Plan, low: float, high: float, duration: float, steps: int, repeats: int,
              min_requests: int, virtual: bool) -> str:
    """What the search will do and how long it will take, before its first trial: from a dry run in virtual
    time when there was one, else at least its arrivals."""
    start = the_plan.start_rps
    each = f"each ≥ {duration:g} s and ≥ {min_requests} requests"
    if the_plan.trials is not None and the_plan.seconds is not None:
        return (f"search: Poisson rates {low:g}–{high:g} req/s from {start:.3g} req/s ({the_plan.whence}, "
                f"{the_plan.took_s:.0f} s), ≈{the_plan.trials} trials ({repeats} seed{'s' * (repeats > 1)}), {each}: "
                f"about {_minutes(the_plan.seconds)} (the same search run in virtual time)")
    n = planned_trials(steps, repeats)
    first = trial_seconds(start or low, duration, min_requests)
    least = first + duration * (n - 1)
    where = "in virtual time (seconds in all)" if virtual else f"at least {least / 60:,.0f} min of arrivals"
    origin = f"from {start:g} req/s ({the_plan.whence})" if start else f"the first at {low:g} req/s"
    return (f"search: Poisson rates {low:g}–{high:g} req/s, up to {n} trials ({steps} bisection steps, then "
            f"the boundary again with {repeats - 1} more seeds), {each}: {where}; {origin}, lasting ≥ {first:,.0f} s")


def _minutes(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds < 120 else f"{seconds / 60:,.1f} min"


def _echo(line: str) -> None:
    click.echo(line, err=True)


def trial_line(trial: SearchTrial, total: int | str) -> str:
    """'  trial 3 of ≤15 ✗   12.500 req/s  seed 0  250 requests  goodput 71% (TPOT)  1,234 tok/s'; `total` a
    bound (an int: ≤N) or a label (~N from a dry run)."""
    verdict = "✓" if trial.met else "✗"
    why = "" if trial.met or not trial.failed_on else f" ({trial.failed_on})"
    small = "  too few requests to decide" if trial.too_small else ""
    late = "  client-limited*" if trial.client_limited else ""
    of = f"≤{total}" if isinstance(total, int) else total
    return (f"  trial {trial.index} of {of} {verdict} {trial.rate:8.3f} req/s  seed {trial.seed}  {trial.requests} "
            f"requests  goodput {trial.goodput:.0%}{why}  {trial.output_tokens_per_s:,.0f} tok/s{small}{late}")


def _print(found: Capacity, goodput: float, folder: Path | None) -> None:
    late = [t for t in found.trials if t.client_limited]
    resting = found.boundary
    caveat = (f"; {len(late)} of {len(found.trials)} trials client-limited*, {sum(t.client_limited for t in resting)} "
              f"of the {len(resting)} it rests on" if late else "")
    if found.capacity_rps is None:
        click.echo(f"{found.note}{caveat}")
    elif found.interval_rps is None:
        click.echo(f"capacity: {found.capacity_rps:.2f} req/s with ≥ {goodput:.0%} goodput (one seed: no interval; "
                   f"--repeats 3 gives one){caveat}")
    else:
        lo, hi = found.interval_rps
        click.echo(f"capacity: {found.capacity_rps:.2f} req/s with ≥ {goodput:.0%} goodput "
                   f"(95% interval {lo:.2f}–{hi:.2f} over {len(found.per_seed_rps or [])} seeds){caveat}")
    if late:
        click.echo("* client-limited: the harness was late in that trial, so its latencies may be its own")
    if found.untrusted is not None:
        click.echo(f"no capacity claimed: {found.untrusted}", err=True)
    if folder is not None:
        click.echo(f"search: {folder / 'search.json'}, {folder / 'search.html'} (each trial's run folder inside)")
