"""The `harness` command line: thin click commands over the library.

Exit codes: 0 ok, 2 usage or bad input, 3 harness error (endpoint unreachable, simulator failed),
130 stopped by Ctrl-C or SIGTERM (the records taken and the summary are written).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from harness import __version__
from harness.errors import EXIT_HARNESS, EXIT_STOPPED, EXIT_USAGE, HarnessError
from harness.gctune import tune_for_timing
from harness.report.table import print_table
from harness.runner import new_run_dir, resolve_and_run, run_scenario, target
from harness.scenario import Scenario, ScenarioError, TraceLoad, load_scenario
from harness.sim.cli import sim
from harness.traces import TraceError, read_trace

_REPO_SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def _default_scenario() -> Path:
    local = Path("scenarios/quickstart.yaml")
    return local if local.exists() else _REPO_SCENARIOS / "quickstart.yaml"


def _api_key(flag_env: str | None, scenario_env: str | None) -> str | None:
    name = flag_env or scenario_env
    if name is None:
        return os.environ.get("OPENAI_API_KEY") or None
    value = os.environ.get(name)
    if not value:
        raise click.BadParameter(f"environment variable {name} is not set", param_hint="--api-key-env")
    return value


@click.group()
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Benchmark LLM inference endpoints with realistic load."""


@main.command()
@click.argument("scenario_path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--endpoint", metavar="URL", help="OpenAI base URL (…/v1). Default: start the bundled simulator.")
@click.option("--model", help="Model name to request. Default: the scenario's, else the endpoint's first.")
@click.option("--api", type=click.Choice(["chat", "completions"]), help="Which OpenAI API to drive.")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key (default: "
              "OPENAI_API_KEY if set). The key itself is never printed or saved.")
@click.option("--reports-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("reports"),
              show_default=True)
@click.option("--pin/--no-pin", default=True, show_default=True,
              help="With the bundled simulator on a machine of 2+ cores: harness on the first, simulator on the last.")
@click.option("--tokenizer", type=click.Path(path_type=Path, exists=True),
              help="A local Hugging Face tokenizer (directory or tokenizer.json) for prompts of exact length "
                   "on a real model. Never downloaded.")
@click.option("--skip-bad-rows", is_flag=True,
              help="Trace phases: skip unreadable rows (counted in summary.json) instead of stopping.")
@click.option("--progress/--no-progress", default=None,
              help="Live progress line on stderr (default: when stderr is a terminal).")
def run(scenario_path: Path | None, endpoint: str | None, model: str | None, api: str | None,
        api_key_env: str | None, reports_dir: Path, pin: bool, tokenizer: Path | None, skip_bad_rows: bool,
        progress: bool | None) -> None:
    """Run SCENARIO (default scenarios/quickstart.yaml) and report each phase side by side."""
    try:
        scenario = load_scenario(scenario_path or _default_scenario())
    except ScenarioError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    if tokenizer is not None:
        workload = scenario.workload.model_copy(update={"tokenizer": str(tokenizer.resolve())})
        scenario = scenario.model_copy(update={"workload": workload})
    if skip_bad_rows:
        phases = [p.model_copy(update={"load": p.load.model_copy(update={"skip_bad_rows": True})})
                  if isinstance(p.load, TraceLoad) else p for p in scenario.phases]
        scenario = scenario.model_copy(update={"phases": phases})
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise click.BadParameter("must start with http:// or https://", param_hint="--endpoint")
    key = _api_key(api_key_env, scenario.endpoint.api_key_env)
    tune_for_timing()
    try:
        result = asyncio.run(resolve_and_run(scenario, reports_dir, url=endpoint, model=model, api=api,  # type: ignore[arg-type]
                                             api_key=key, warn=_warn, pin=pin,
                                             progress_to=sys.stderr if _show_progress(progress) else None))
    except HarnessError as exc:
        raise SystemExit(_fail(str(exc), EXIT_HARNESS)) from None
    except (TraceError, ValueError) as exc:  # unreadable trace, dataset or tokenizer
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise SystemExit(_fail("stopped: requests in flight cancelled; every record taken is in the report",
                               EXIT_STOPPED)) from None
    print_table(result.summary)
    for phase in result.summary["phases"]:
        if phase["client_limited"]:
            _warn(f"phase {phase['name']} was client-limited: {phase['client_limited_reason']}")
    click.echo(f"\nreport: {result.run_dir}")
    if result.summary["run"].get("stopped"):
        raise SystemExit(EXIT_STOPPED)


def _show_progress(flag: bool | None) -> bool:
    return sys.stderr.isatty() if flag is None else flag


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@main.command()
@click.argument("scenario_path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print summary.json instead of the table.")
def predict(scenario_path: Path | None, as_json: bool) -> None:
    """Predict SCENARIO on its simulated accelerator in virtual time: no network, no waiting."""
    from harness.sim.predict import predict as run_prediction

    try:
        scenario = load_scenario(scenario_path or _default_scenario())
    except ScenarioError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    try:
        summary = run_prediction(scenario)
    except TraceError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        print_table(summary)


@main.command()
@click.option("--levels", default="1,64,256,1024", show_default=True, help="Concurrent streams to try.")
@click.option("--seconds", type=click.FloatRange(1, 600), default=5.0, show_default=True,
              help="Duration of each level.")
@click.option("--reports-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("reports"),
              show_default=True)
def calibrate(levels: str, seconds: float, reports_dir: Path) -> None:
    """Measure this machine's harness against the simulator's ground truth, and its ceiling."""
    from harness.calibrate import calibrate as run_calibration
    from harness.calibrate import render
    from harness.calibration_store import calibration_path

    try:
        counts = [int(x) for x in levels.split(",")]
        if not counts or min(counts) < 1:
            raise ValueError
    except ValueError:
        raise click.BadParameter("a comma-separated list of positive integers", param_hint="--levels") from None
    tune_for_timing()
    report = asyncio.run(run_calibration(counts, seconds, reports_dir))
    click.echo(render(report))
    click.echo(f"\nsaved: {calibration_path()}")


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--write/--no-write", default=True, show_default=True,
              help="Rewrite the run's summary.json and report.html.")
def report(run_dir: Path, write: bool) -> None:
    """Rebuild a run's statistics, table and conclusion offline from its saved records."""
    from harness.report.offline import rebuild

    try:
        summary = rebuild(run_dir)
    except ScenarioError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    if write:
        from harness.records import read_records
        from harness.report.files import write_reports
        from harness.scrape import read_server_metrics

        write_reports(summary, run_dir, list(read_records(run_dir / "requests.jsonl")), read_server_metrics(run_dir))
    print_table(summary)


@main.command("search")
@click.argument("scenario_path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--slo", "slo_text", required=True, help="e.g. ttft_p99=500ms,tpot_p99=50ms")
@click.option("--goodput", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="Share of requests that must meet every SLO.")
@click.option("--low", type=click.FloatRange(min=0.01), default=0.5, show_default=True, help="Lowest rate (req/s).")
@click.option("--high", type=click.FloatRange(min=0.01), default=64.0, show_default=True, help="Highest rate.")
@click.option("--duration", type=click.FloatRange(min=1), default=20.0, show_default=True,
              help="Seconds of arrivals per trial.")
@click.option("--repeats", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Seeds to bisect the boundary with (the interval comes from them).")
@click.option("--predict", "virtual", is_flag=True,
              help="Run trials in virtual time on the scenario's simulated accelerator (no network, seconds).")
@click.option("--endpoint", metavar="URL", help="OpenAI base URL; default: the bundled simulator, started once.")
@click.option("--model", help="Model name to request.")
@click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key (default: "
              "OPENAI_API_KEY if set).")
@click.option("--reports-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("reports"),
              show_default=True, help="Each trial's run directory goes here.")
@click.option("--steps", type=click.IntRange(1, 20), default=7, show_default=True, help="Bisection steps.")
@click.option("--json", "as_json", is_flag=True, help="Print the search result as JSON.")
def search_cmd(scenario_path: Path | None, slo_text: str, goodput: float, low: float, high: float, duration: float,
               repeats: int, virtual: bool, endpoint: str | None, model: str | None, api_key_env: str | None,
               reports_dir: Path, steps: int, as_json: bool) -> None:
    """Find the highest Poisson rate whose goodput meets the SLOs, with a confidence interval."""
    from harness.search import parse_slo, search

    try:
        scenario = load_scenario(scenario_path or _default_scenario())
        slo = parse_slo(slo_text)
    except ScenarioError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--slo") from None
    if high <= low:
        raise click.BadParameter("must be above --low", param_hint="--high")
    key = _api_key(api_key_env, scenario.endpoint.api_key_env)

    async def searching() -> dict[str, Any]:
        if virtual:
            from harness.sim.predict import predict as run_prediction

            async def predicted(s: Scenario) -> dict[str, Any]:
                return run_prediction(s)

            return await search(scenario, predicted, slo, goodput, low, high, duration, steps, repeats)
        async with target(scenario, url=endpoint, model=model, api=None, api_key=key) as (ep, bundled):
            async def trial(s: Scenario) -> dict[str, Any]:
                result = await run_scenario(s, ep, new_run_dir(reports_dir, f"{s.name}-search"), bundled=bundled,
                                            warn=_warn)
                return result.summary

            return await search(scenario, trial, slo, goodput, low, high, duration, steps, repeats)

    try:
        found = asyncio.run(searching())
    except HarnessError as exc:
        raise SystemExit(_fail(str(exc), EXIT_HARNESS)) from None
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    for t in found["trials"]:
        click.echo(f"  rate {t['rate']:8.3f} req/s  seed {t['seed']}  goodput {t['goodput']:.0%}  "
                   f"{t['output_tokens_per_s']:,.0f} tok/s")
    if found["capacity_rps"] is None:
        click.echo(found["note"])
    else:
        lo, hi = found["interval_rps"]
        click.echo(f"capacity: {found['capacity_rps']:.2f} req/s with ≥ {goodput:.0%} goodput "
                   f"(95% interval {lo:.2f}–{hi:.2f} over {len(found['per_seed_rps'])} seeds)")


@main.group()
def trace() -> None:
    """Request traces: inspect and convert."""


_format_option = click.option("--format", "fmt", type=click.Choice(["azure", "mooncake", "burstgpt", "generic"]),
                              default=None, help="Default: recognised from the first line.")


@trace.command("inspect")
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_format_option
@click.option("--skip-bad-rows", is_flag=True, help="Skip and count unreadable rows instead of stopping.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--png", type=click.Path(path_type=Path, dir_okay=False), help="Also plot arrivals per second here.")
def trace_inspect(path: Path, fmt: str | None, skip_bad_rows: bool, as_json: bool, png: Path | None) -> None:
    """Rows, span, mean rate, inter-arrival CV and length percentiles of a trace file."""
    try:
        loaded = read_trace(path, fmt, skip_bad=skip_bad_rows)  # type: ignore[arg-type]
    except TraceError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    stats = loaded.stats()
    if png is not None:
        from harness.report.traceplot import arrivals_png

        arrivals_png(loaded, png)
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    rate = "-" if stats["mean_rate"] is None else f"{stats['mean_rate']:.2f}"
    cv = "-" if stats["interarrival_cv"] is None else f"{stats['interarrival_cv']:.2f}"
    click.echo(f"{path}\n  rows {stats['rows']:,}  span {stats['span_s']:,.1f} s  mean rate {rate}/s  "
               f"inter-arrival CV {cv}  distinct arrival instants {stats['distinct_arrivals']:,}")
    for key in ("input_tokens", "output_tokens"):
        d = stats[key]
        click.echo(f"  {key:<14} p50 {d['p50']:,.0f}  p90 {d['p90']:,.0f}  p99 {d['p99']:,.0f}  mean {d['mean']:,.1f}")
    if stats["skipped"]:
        click.echo(f"  skipped {stats['skipped']}")


@trace.command("convert")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("target", type=click.Path(path_type=Path, dir_okay=False))
@_format_option
@click.option("--skip-bad-rows", is_flag=True)
def trace_convert(source: Path, target: Path, fmt: str | None, skip_bad_rows: bool) -> None:
    """Write any trace as generic JSONL (timestamp s, input_tokens, output_tokens[, hash_ids, session])."""
    try:
        rows = read_trace(source, fmt, skip_bad=skip_bad_rows).rows  # type: ignore[arg-type]
    except TraceError as exc:
        raise SystemExit(_fail(str(exc), EXIT_USAGE)) from None
    with target.open("w", encoding="utf-8") as fh:
        for r in rows:
            obj: dict[str, object] = {"timestamp": r.arrival_s, "input_tokens": r.input_tokens,
                                      "output_tokens": r.output_tokens}
            if r.hash_ids is not None:
                obj["hash_ids"] = list(r.hash_ids)
            if r.session is not None:
                obj["session"] = r.session
            fh.write(json.dumps(obj) + "\n")
    click.echo(f"{len(rows):,} rows -> {target}")


def _fail(message: str, code: int) -> int:
    click.echo(f"error: {message}", err=True)
    return code


main.add_command(sim)
