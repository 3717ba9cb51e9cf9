"""`harness search`: the highest Poisson rate whose goodput meets the SLOs, with a confidence interval."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Coroutine
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
from harness.cli.errors import guarded
from harness.cli.quick_flags import with_flags
from harness.cli.request_flags import REQUEST_FLAGS, endpoint_url, request_options, with_request_flags
from harness.client.backend import Endpoint
from harness.config.quick import length_spec
from harness.config.scenario import SLO, Scenario, parse_scenario
from harness.errors import EXIT_STOPPED
from harness.report.files import write_run
from harness.run.display import LineDisplay
from harness.run.runner import claimed, new_run_dir, run_scenario
from harness.run.target import target
from harness.stats.schema import Summary
from harness.tools.predict import predict_async
from harness.tools.search import (
    MIN_REQUESTS,
    Capacity,
    SearchStopped,
    SearchTrial,
    Trial,
    parse_slo,
    planned_trials,
    search,
    trial_seconds,
)


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
@click.option("--steps", type=click.IntRange(1, 20), default=7, show_default=True, help="Bisection steps.")
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
               api_key_env: str | None, reports_dir: Path, steps: int, min_requests: int, as_json: bool,
               **lengths: Any) -> None:
    """Find the highest Poisson rate whose goodput meets the SLOs, with a confidence interval.

    \b
    Examples:
      harness search --slo ttft=500ms,tpot=50ms --endpoint http://localhost:8000/v1
      harness search --predict --slo ttft=1s --prompt-tokens 1024 --output-tokens 256
    """
    shape = {k: lengths.pop(k) for k in REQUEST_FLAGS}
    scenario = _with_lengths(scenario_or_default(scenario_path), lengths)
    slo = slo or scenario.slo
    endpoint, api = endpoint_url(endpoint, base_url)
    scenario, headers = with_request_flags(scenario, shape, lambda line: click.echo(line, err=True), api)
    if not slo.model_dump(exclude_none=True):
        raise click.BadParameter("give the limits to search under (the scenario sets none)", param_hint="--slo")
    if high <= low:
        raise click.BadParameter("must be above --low", param_hint="--high")
    if virtual and endpoint is not None:
        raise click.BadParameter("--predict runs on the scenario's simulated accelerator; drop one of them",
                                 param_hint="--endpoint")
    writable_dir(reports_dir, "--reports-dir")
    key = api_key(api_key_env, scenario.endpoint.api_key_env)

    total = planned_trials(steps, repeats)
    _plan(low, high, duration, steps, repeats, min_requests, virtual)
    bisect = functools.partial(search, slo=slo, goodput=goodput, low=low, high=high, duration_s=duration,
                               steps=steps, repeats=repeats, min_requests=min_requests,
                               said=lambda trial: _echo(trial_line(trial, total)), note=_echo)

    async def searching() -> Capacity:
        if virtual:
            return await bisect(scenario, predict_async)
        async with target(scenario, url=endpoint, model=model, api=None, api_key=key, headers=headers) as (
                ep, bundled):
            return await bisect(scenario, _on_endpoint(ep, bundled, reports_dir, total))

    found = _searched(searching())
    if as_json:
        click.echo(json.dumps(found.to_json(), indent=2))
    else:
        _print(found, goodput)


def _on_endpoint(endpoint: Endpoint, bundled: bool, reports_dir: Path, total: int) -> Trial:
    """A trial as a run against the endpoint, in a run folder of its own, said as it starts and every 10 s
    while it runs (a first trial at a low rate lasts minutes)."""
    started = 0

    async def trial(s: Scenario) -> Summary:
        nonlocal started
        started += 1
        with claimed(new_run_dir(reports_dir, f"{s.name}-search")) as run_dir:
            display = LineDisplay(sys.stderr)
            display.say(f"  trial {started} of ≤{total}: {s.phases[0].name} req/s …")
            result = await run_scenario(s, endpoint, run_dir, bundled=bundled, display=display)
        write_run(result)
        return result.summary

    return trial


def _searched(searching: Coroutine[Any, Any, Capacity]) -> Capacity:
    """The search's result; a trial stopped by Ctrl-C or SIGTERM ends it with exit 130, claiming no capacity."""
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
    return with_flags(scenario, lengths.get("tokenizer"), skip_bad_rows=False, accelerator=None)


def _plan(low: float, high: float, duration: float, steps: int, repeats: int, min_requests: int,
          virtual: bool) -> None:
    """What the search will do and how long it will take at least, before its first trial."""
    n = planned_trials(steps, repeats)
    first = trial_seconds(low, duration, min_requests)
    least = first + duration * (n - 1)
    where = "in virtual time (seconds in all)" if virtual else f"at least {least / 60:,.0f} min of arrivals"
    click.echo(f"search: Poisson rates {low:g}–{high:g} req/s, up to {n} trials ({steps} bisection steps, then "
               f"the boundary again with {repeats - 1} more seeds), each ≥ {duration:g} s and ≥ {min_requests} "
               f"requests: {where}; the first, at {low:g} req/s, lasts ≥ {first:,.0f} s", err=True)


def _echo(line: str) -> None:
    click.echo(line, err=True)


def trial_line(trial: SearchTrial, total: int) -> str:
    """'  trial 3 of ≤15 ✗   12.500 req/s  seed 0  250 requests  goodput 71% (TPOT)  1,234 tok/s'."""
    verdict = "✓" if trial.met else "✗"
    why = "" if trial.met or not trial.failed_on else f" ({trial.failed_on})"
    small = "  too few requests to decide" if trial.too_small else ""
    return (f"  trial {trial.index} of ≤{total} {verdict} {trial.rate:8.3f} req/s  seed {trial.seed}  {trial.requests} "
            f"requests  goodput {trial.goodput:.0%}{why}  {trial.output_tokens_per_s:,.0f} tok/s{small}")


def _print(found: Capacity, goodput: float) -> None:
    if found.capacity_rps is None:
        click.echo(found.note)
    elif found.interval_rps is None:
        click.echo(f"capacity: {found.capacity_rps:.2f} req/s with ≥ {goodput:.0%} goodput (one seed: no interval; "
                   "--repeats 3 gives one)")
    else:
        lo, hi = found.interval_rps
        click.echo(f"capacity: {found.capacity_rps:.2f} req/s with ≥ {goodput:.0%} goodput "
                   f"(95% interval {lo:.2f}–{hi:.2f} over {len(found.per_seed_rps or [])} seeds)")
