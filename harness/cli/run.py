"""`harness run`: a scenario against an endpoint or the bundled simulator, reported side by side."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

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
from harness.cli.output_flags import ExportFlags, after_run, export_options, live_metrics, with_export_flags
from harness.cli.peer_flags import PeerFlags, peer_options
from harness.cli.quick_flags import QuickFlags, flag_scenario, quick_options, with_flags, with_thresholds
from harness.cli.request_flags import Headers, RequestFlags, endpoint_url, request_options, with_request_flags
from harness.cli.split_flags import SplitFlags, sharding_of, split_options
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
from harness.run.distributed.sharding import Sharding
from harness.run.exporter import LiveMetrics
from harness.run.result import RunResult
from harness.run.run_dir import claimed, new_run_dir
from harness.run.runner import run_scenario
from harness.run.signals import results_kept
from harness.run.target import target
from harness.stats.repeats import repeat_scenario
from harness.tools.calibration_store import ceiling_tokens_per_s

RUN_GROUPS = {
    "Quick run (no scenario file)": ["rate", "max_concurrency", "concurrency", "batch", "batches", "requests",
                                     "duration_s", "prompt_tokens", "output_tokens", "seed", "slo_text", "warmup_s"],
    "Peers' load and data flags (vLLM bench, GuideLLM)": ["dataset_name", "dataset_path", "burstiness", "profile",
                                                          "sweep"],
    "Endpoint": ["endpoint", "base_url", "model", "api", "api_key_env", "wait", "tokenizer", "accelerator",
                 "hardware", "presets", "pin"],
    "Request shape (gateways, sampling, TLS)": [f.name for f in fields(RequestFlags)],
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
@split_options
@click.option("--tokenizer", metavar="PATH|server|words",
              help="Prompts of exact length on a real model: a local Hugging Face tokenizer (directory or "
                   "tokenizer.json, never downloaded), 'server' to count with the endpoint's own /tokenize, or "
                   "'words' for the harness's words as they are. Default: the endpoint's /tokenize where it has one.")
@click.option("--skip-bad-rows", is_flag=True,
              help="Trace phases: skip unreadable rows (counted in summary.json) instead of stopping.")
@click.option("--progress", type=click.Choice(["auto", "live", "lines", "off"]), default="auto", show_default=True,
              help="On stderr: a live view cut to the terminal (live), a plain line every 10 s (lines), or "
                   "neither; auto is live on a terminal, lines elsewhere.")
@quick_options
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
        hardware: str | None, tokenizer: str | None, skip_bad_rows: bool, progress: str,
        thresholds: tuple[str, ...], repeat: int, split: SplitFlags, quick: QuickFlags, request: RequestFlags,
        export: ExportFlags, peers: PeerFlags) -> None:
    """Run SCENARIO (default scenarios/quickstart.yaml), or a quick run from flags (--rate, --concurrency,
    --batch), and report each phase side by side."""
    endpoint, api = endpoint_url(endpoint, base_url, api)
    scenario = with_flags(flag_scenario(scenario_path, quick, peers, api), tokenizer, skip_bad_rows, accelerator,
                          wait)
    scenario = with_thresholds(scenario, thresholds)
    scenario = _with_hardware(scenario, hardware)
    display = make_display(progress)
    sharding = sharding_of(split, repeat, display)
    scenario = with_export_flags(scenario, export)
    scenario, headers = with_request_flags(scenario, request, display)
    writable_dir(reports_dir, "--reports-dir")
    key = api_key(api_key_env, scenario.endpoint.api_key_env)
    tune_for_timing()
    workers = split.workers
    aim = _Aim(endpoint, model, api, key, headers, pin, sharding, workers, split.ray_address)
    by_hand = "" if sharding is None or sharding.relay is not None or sharding.shard.count == 1 else str(sharding.shard)
    with live_metrics(scenario, by_hand) as metrics, results_kept(display):
        results, died = _repeats(scenario, reports_dir, repeat, aim, display, metrics)
        after_run(scenario, results, key, display, export)  # completed, failed or stopped
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
        result = write_somewhere(result, display)
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
                      voice=display) as (endpoint, bundled):
        for line in plan_lines(scenario, endpoint, bundled, run_dir):
            display.say(line)
        return await run_scenario(scenario, endpoint, run_dir, bundled=bundled, display=display,
                                  ceiling_tokens_per_s=ceiling_tokens_per_s(), metrics=metrics, sharding=sharding)
