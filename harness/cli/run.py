"""`harness run`: a scenario against an endpoint or the bundled simulator, reported side by side."""

from __future__ import annotations

import threading
import time
from collections import Counter
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
    writable_dir,
)
from harness.cli.errors import fail, guarded
from harness.cli.grouped import GroupedCommand
from harness.cli.output_flags import after_run, export_options, live_metrics, with_export_flags
from harness.cli.peer_flags import peer_options
from harness.cli.quick_flags import flag_scenario, with_flags, with_thresholds
from harness.cli.request_flags import REQUEST_FLAGS, Headers, endpoint_url, request_options, with_request_flags
from harness.client.dialects import DIALECTS
from harness.config.scenario import Scenario, parse_hardware
from harness.errors import EXIT_HANGUP, EXIT_HARNESS, EXIT_NOTHING_OK, EXIT_REGRESSION, EXIT_STOPPED
from harness.gctune import tune_for_timing
from harness.report.files import write_somewhere
from harness.report.notes import notes
from harness.report.repeats import write_repeats
from harness.report.table import print_table
from harness.report.threshold_lines import threshold_lines
from harness.run.display import Display, make_display, plan_lines
from harness.run.distributed.conduct import run_workers
from harness.run.distributed.relay import Relay
from harness.run.distributed.sharding import LEAD_S, Sharding, since_launch_s
from harness.run.exporter import LiveMetrics
from harness.run.result import RunResult
from harness.run.run_dir import claimed, new_run_dir
from harness.run.runner import run_scenario
from harness.run.signals import results_kept
from harness.run.target import target
from harness.stats.repeats import repeat_scenario
from harness.tools.calibration_store import ceiling_tokens_per_s
from harness.workload.shards import LATE_MS, Shard

RUN_GROUPS = {
    "Quick run (no scenario file)": ["rate", "max_concurrency", "concurrency", "batch", "batches", "requests",
                                     "duration_s", "prompt_tokens", "output_tokens", "seed", "slo_text", "warmup_s"],
    "Peers' load and data flags (vLLM bench, GuideLLM)": ["dataset_name", "dataset_path", "burstiness", "profile",
                                                          "sweep"],
    "Endpoint": ["endpoint", "base_url", "model", "api", "api_key_env", "wait", "tokenizer", "accelerator",
                 "hardware", "presets", "pin"],
    "Request shape (gateways, sampling, TLS)": list(REQUEST_FLAGS),
    "Output and pass/fail": ["reports_dir", "progress", "thresholds", "repeat", "skip_bad_rows"],
    "Scale-out": ["workers", "ray_address", "shard_text", "start_at", "late_ok", "phase_slack_s", "clock_ref"],
    "Live metrics and tags": ["metrics_port", "metrics_hold_s", "pushgateway", "pushgateway_job", "pushgateway_label",
                              "labels", "metadata", "save_result", "output_json"],
}
RUN_EXAMPLES = [
    "harness run --endpoint http://localhost:8000/v1 --rate 4 --duration 60s --slo ttft=500ms --batch 64",
    "harness run scenarios/sweep.yaml --threshold 'ttft_p99<500ms' --reports-dir reports",
]


@click.command(cls=GroupedCommand, groups=RUN_GROUPS, examples=RUN_EXAMPLES,
               short_help="Run a scenario, or a quick run from --rate/--concurrency flags.")
@scenario_argument
@presets_option
@click.option("--endpoint", "--target", "endpoint", metavar="URL|PATH",
              help="OpenAI base URL (…/v1), or a request URL (…/v1/chat/completions), or with --base-url its path "
                   "(/v1/chat/completions). Default: start the bundled simulator.")
@click.option("--base-url", metavar="URL", help="The server (http://host:8000), as vLLM's bench takes it.")
@click.option("--model", help="Model name to request. Default: the scenario's, else the endpoint's first.")
@click.option("--api", type=click.Choice(list(DIALECTS)), help="Which API to drive (docs/apis.md).")
@api_key_env_option
@request_options
@reports_dir_option
@click.option("--pin/--no-pin", default=True, show_default=True,
              help="With the bundled simulator on a machine of 2+ cores: harness on the first, simulator on the last.")
@click.option("--wait-for-endpoint", "wait", type=Duration(), metavar="DURATION",
              help="Keep asking the endpoint for its models this long while it does not answer (a server still "
                   "starting), before giving up (exit 3).")
@click.option("--accelerator", metavar="TEXT",
              help="What the endpoint runs on (e.g. '8xH100, TP 8'), for the report's header.")
@click.option("--hardware", metavar="PRESET[,model=M][,tp=N][,dtype=fp8]",
              help="What the endpoint runs on, as presets (`harness sim presets`): each phase then gets an "
                   "estimate of its memory-bandwidth and compute utilisation (MBU, MFU).")
@click.option("--shard", "shard_text", metavar="i/N",
              help="Send only shard i (0-based) of N of every phase: every N-th request from the i-th, as one "
                   "process would send it. Needs --start-at; `harness merge` joins the shards' run directories.")
@click.option("--workers", type=click.IntRange(min=2), metavar="N",
              help="Send the load from N local processes, one shard each, on their own cores where there are "
                   "enough, merged into one run directory.")
@click.option("--ray", "ray_address", metavar="auto|ADDRESS",
              help="With --workers: run each shard on a Ray actor of this cluster (auto: the one RAY_ADDRESS or "
                   "a local `ray start` names), spread across its nodes. Needs `pip install 'harness[ray]'`.")
@click.option("--relay", is_flag=True, hidden=True,
              help="A worker of --workers or --ray: tell the parent on stdout, keep its batch barrier on stdin.")
@click.option("--start-at", type=float, metavar="UNIX_S",
              help="Start the first phase at this Unix time (seconds), so shards on several hosts start together.")
@click.option("--late-ok", is_flag=True,
              help="With --start-at: start even when that time has passed (the shard says how late it began).")
@click.option("--phase-slack", "phase_slack_s", type=Duration(), default="5s", show_default=True,
              metavar="DURATION",
              help="With --shard (by hand): each phase after the first starts on every shard at a planned time, "
                   "the previous phase's schedule plus this, for its last answers to end.")
@click.option("--clock-ref", metavar="URL",
              help="With --shard (by hand): measure this host's clock against a `harness clock` at URL before the "
                   "start, so `harness merge` puts every shard on one clock and names a shard whose clock is off.")
@click.option("--tokenizer", metavar="PATH|server|words",
              help="Prompts of exact length on a real model: a local Hugging Face tokenizer (directory or "
                   "tokenizer.json, never downloaded), 'server' to count with the endpoint's own /tokenize, or "
                   "'words' for the harness's words as they are. Default: the endpoint's /tokenize where it has one.")
@click.option("--skip-bad-rows", is_flag=True,
              help="Trace phases: skip unreadable rows (counted in summary.json) instead of stopping.")
@click.option("--progress", type=click.Choice(["auto", "live", "lines", "off"]), default="auto", show_default=True,
              help="On stderr: a live view cut to the terminal (live), a plain line every 10 s (lines), or "
                   "neither; auto is live on a terminal, lines elsewhere.")
@click.option("--rate", "--request-rate", "rate", type=click.FloatRange(min=0, min_open=True),
              help="Quick run: Poisson arrivals per second.")
@click.option("--max-concurrency", type=click.IntRange(min=1), metavar="N",
              help="Quick run, with --rate: at most N requests in flight (one phase; arrivals wait beyond it and "
                   "the wait shows as schedule lag), as vLLM's bench serve. N users in a closed loop: --concurrency.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Quick run: this many users, closed loop.")
@click.option("--batch", type=click.IntRange(min=1),
              help="Quick run: then two training-style batches of this size (send all, wait for all).")
@click.option("--requests", "--num-prompts", "requests", type=click.IntRange(min=1),
              help="Quick run: requests per phase (default 100).")
@click.option("--batches", type=click.IntRange(min=1), metavar="N", help="Quick run, with --batch: how many batches "
              "(default 2).")
@click.option("--warmup", "warmup_s", type=Duration(), metavar="DURATION",
              help="Quick run: leave the first DURATION of each --rate/--concurrency phase out of its statistics.")
@click.option("--duration", "duration_s", type=Duration(),
              help="Quick run: length of a --rate or --concurrency phase (30s, 5m).")
@click.option("--prompt-tokens", "--random-input-len", "prompt_tokens", default="256", show_default=True,
              metavar="N|DIST",
              help="Quick run: prompt length, or a distribution: uniform:128:2048, normal:1000:300, lognormal:512:0.5.")
@click.option("--output-tokens", "--random-output-len", "output_tokens", default="128", show_default=True,
              metavar="N|DIST", help="Quick run: answer length.")
@click.option("--seed", type=int, default=0, show_default=True, help="Quick run: seed of arrivals and prompts.")
@click.option("--slo", "slo_text", metavar="LIMITS", help="Quick run: e.g. ttft=500ms,tpot=50ms (per request; "
              "ttft_answer=…: the answer's first token, after any thinking).")
@click.option("--threshold", "thresholds", multiple=True, metavar="EXPR",
              help="Pass/fail on every phase, e.g. 'ttft_p99<500ms' or 'error_rate<1%' (repeatable; any broken: "
                   "exit 99). Metrics: docs/scenarios.md.")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Run the scenario N times (fresh seeds; a fresh bundled simulator each) into one folder, and "
                   "report each metric's mean with its 95% interval.")
@export_options
@peer_options
@guarded
def run(scenario_path: Path | None, endpoint: str | None, base_url: str | None, model: str | None, api: str | None,
        api_key_env: str | None, reports_dir: Path, pin: bool, wait: float | None, accelerator: str | None,
        hardware: str | None,
        shard_text: str | None, workers: int | None, ray_address: str | None, relay: bool, start_at: float | None,
        late_ok: bool, tokenizer: str | None, skip_bad_rows: bool, progress: str, repeat: int, **quick: Any) -> None:
    """Run SCENARIO (default scenarios/quickstart.yaml), or a quick run from flags (--rate, --concurrency,
    --batch), and report each phase side by side."""
    export = {k: quick.pop(k) for k in ("metrics_port", "metrics_hold_s", "pushgateway", "pushgateway_job",
                                        "pushgateway_label", "labels", "metadata", "save_result", "output_json")}
    slack_s, thresholds, clock_ref = quick.pop("phase_slack_s"), quick.pop("thresholds"), quick.pop("clock_ref")
    shape = {k: quick.pop(k) for k in REQUEST_FLAGS}
    endpoint, api = endpoint_url(endpoint, base_url, api)
    scenario = with_flags(flag_scenario(scenario_path, quick, api), tokenizer, skip_bad_rows, accelerator, wait)
    scenario = with_thresholds(scenario, thresholds)
    scenario = _with_hardware(scenario, hardware)
    display = make_display(progress)
    sharding = _sharding(shard_text, _start(start_at, late_ok), repeat, Relay(warn=display.warn) if relay else None,
                         slack_s, clock_ref)
    _check_workers(workers, ray_address, sharding, repeat)
    scenario = with_export_flags(scenario, export)
    scenario, headers = with_request_flags(scenario, shape, display.warn)
    writable_dir(reports_dir, "--reports-dir")
    key = api_key(api_key_env, scenario.endpoint.api_key_env)
    tune_for_timing()
    aim = _Aim(endpoint, model, api, key, headers, pin, sharding, workers, ray_address)
    by_hand = "" if sharding is None or sharding.relay is not None or sharding.shard.count == 1 else str(sharding.shard)
    with live_metrics(scenario, by_hand) as metrics, results_kept(display.warn):
        results, died = _repeats(scenario, reports_dir, repeat, aim, display, metrics)
        after_run(scenario, results, key, display.warn, export)  # completed, failed or stopped
    if died:
        raise fail(f"{len(died)} of {workers} workers died: the run is incomplete", EXIT_HARNESS)
    _exit(results)


@dataclass(frozen=True)
class _Aim:
    """Where each run goes and how it is split: the endpoint and its key, the shard, the workers."""

    endpoint: str | None
    model: str | None
    api: str | None
    key: str | None
    headers: Headers
    pin: bool
    sharding: Sharding | None
    workers: int | None
    ray_address: str | None


def _repeats(scenario: Scenario, reports_dir: Path, repeat: int, aim: _Aim, display: Display,
             metrics: LiveMetrics | None) -> tuple[list[RunResult], list[str]]:
    """The scenario run `repeat` times (a folder of runs when more than once), each reported as it ends;
    stopped at the first that was stopped or lost a worker. The results, and the workers that died."""
    parent = new_run_dir(reports_dir, f"{scenario.name}-x{repeat}") if repeat > 1 else None
    results: list[RunResult] = []
    died: list[str] = []
    for k in range(repeat):
        each = repeat_scenario(scenario, k)
        run_dir = parent / f"run-{k + 1}" if parent else new_run_dir(reports_dir, scenario.name)
        with claimed(run_dir):
            if aim.workers is None:
                result = event_loop.run(_run(each, run_dir, aim.endpoint, aim.model, aim.api, aim.key, aim.headers,
                                             aim.pin, display, metrics, aim.sharding))
            else:
                result, died = event_loop.run(run_workers(each, run_dir, aim.endpoint, aim.model, aim.api, aim.key,
                                                          aim.headers, display, metrics, aim.workers, aim.ray_address))
        results.append(result)
        _report(result, died, display, metrics)
        if died or result.summary.run.stopped:
            break
    if parent is not None and not died:
        click.echo(f"\n{write_repeats(parent, [r.summary for r in results])}\n\nrepeats: {parent}")
    return results, died


def _report(result: RunResult, died: list[str], display: Display, metrics: LiveMetrics | None) -> None:
    """A finished run's files, table and warnings; its phases' final client-limited verdicts to the
    exporter."""
    summary = result.summary
    if metrics is not None:
        metrics.verdicts({p.name: p.client_limited for p in summary.phases})
    slow = threading.Timer(1.0, lambda: display.say("writing the report…"))  # said only when it takes a while
    slow.start()
    try:
        result = write_somewhere(result, display.warn)
    finally:
        slow.cancel()
    print_table(summary)
    for line in [*notes(summary), *died]:
        display.warn(line)
    click.echo(f"\nreport: {result.run_dir}")


def _exit(results: list[RunResult]) -> None:
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


def _check_workers(workers: int | None, ray_address: str | None, sharding: Sharding | None, repeat: int) -> None:
    if workers is not None and (sharding is not None or repeat > 1):
        raise click.BadParameter("runs the whole schedule itself: drop --shard, --start-at and --repeat",
                                 param_hint="--workers")
    if ray_address is not None and workers is None:
        raise click.BadParameter("needs --workers N: how many shards, one a Ray actor", param_hint="--ray")


def _start(start_at: float | None, late_ok: bool) -> float | None:
    """A common start already past would start this shard late against the others: refused unless asked
    for."""
    past_s = None if start_at is None else time.time() - start_at
    if past_s is not None and past_s * 1000 > LATE_MS and not late_ok:
        launched = since_launch_s()
        took = "" if launched is None else f"; this process was launched {launched:,.1f} s ago"
        raise click.BadParameter(f"{start_at!r} is {past_s:,.1f} s in the past: this shard would begin that late "
                                 f"against the others{took}, and a shard still builds its requests and opens its "
                                 f"connections before the start: give a lead of at least {LEAD_S:g} s (--late-ok "
                                 "to start now anyway)", param_hint="--start-at")
    return start_at


def _sharding(shard_text: str | None, start_at: float | None, repeat: int, relay: Relay | None,
              slack_s: float, clock_ref: str | None = None) -> Sharding | None:
    if relay is not None and shard_text is None:
        raise click.BadParameter("is for the workers of --workers and --ray, which run with --shard",
                                 param_hint="--relay")
    if shard_text is None:
        if clock_ref is not None:
            raise click.BadParameter("is for shards by hand: give --shard i/N and --start-at", param_hint="--clock-ref")
        return None if start_at is None else Sharding(Shard(0, 1), start_at)
    try:
        shard = Shard.parse(shard_text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--shard") from None
    if start_at is None:
        raise click.BadParameter("needs --start-at, the Unix time every shard starts at (and derives the run's "
                                 "request ids from)", param_hint="--shard")
    if repeat > 1:
        raise click.BadParameter("a shard runs once; repeat the whole sharded run instead", param_hint="--repeat")
    if clock_ref is not None and relay is not None:
        raise click.BadParameter("is for shards by hand: a worker measures its clock against its parent",
                                 param_hint="--clock-ref")
    return Sharding(shard, start_at, relay, slack_s, clock_ref)


def _with_hardware(scenario: Scenario, hardware: str | None) -> Scenario:
    if hardware is None:
        return scenario
    try:
        declared = parse_hardware(hardware)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--hardware") from None
    return scenario.changed(endpoint=scenario.endpoint.changed(hardware=declared))


async def _run(scenario: Scenario, run_dir: Path, url: str | None, model: str | None, api: str | None,
               key: str | None, headers: Headers, pin: bool, display: Display, metrics: LiveMetrics | None,
               sharding: Sharding | None = None) -> RunResult:
    async with target(scenario, url=url, model=model, api=api, api_key=key, headers=headers, pin=pin,
                      log=display.warn) as (endpoint, bundled):
        for line in plan_lines(scenario, endpoint, bundled, run_dir):
            display.say(line)
        return await run_scenario(scenario, endpoint, run_dir, bundled=bundled, display=display,
                                  ceiling_tokens_per_s=ceiling_tokens_per_s(), metrics=metrics, sharding=sharding)
