"""`harness run`: a scenario against an endpoint or the bundled simulator, reported side by side."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import click

from harness import loop as event_loop
from harness.cli.common import (
    api_key,
    api_key_env_option,
    presets_option,
    reports_dir_option,
    scenario_argument,
    writable_dir,
)
from harness.cli.errors import fail, guarded
from harness.cli.grouped import GroupedCommand
from harness.cli.output_flags import ExportFlags, after_run, export_options, live_metrics
from harness.cli.peer_flags import PeerFlags, peer_options
from harness.cli.quick_flags import QuickFlags, quick_options
from harness.cli.request_flags import Headers, RequestFlags, endpoint_url, request_options
from harness.cli.run_end import exit_of, report_run
from harness.cli.scenario_flags import ScenarioFlags, run_scenario_of, scenario_options
from harness.cli.split_flags import SplitFlags, sharding_of, split_options
from harness.client.dialects import DIALECTS
from harness.config.scenario import Scenario
from harness.errors import EXIT_HARNESS
from harness.gctune import tune_for_timing
from harness.report.repeats import write_repeats
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
@split_options
@click.option("--progress", type=click.Choice(["auto", "live", "lines", "off"]), default="auto", show_default=True,
              help="On stderr: a live view cut to the terminal (live), a plain line every 10 s (lines), or "
                   "neither; auto is live on a terminal, lines elsewhere.")
@quick_options
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Run the scenario N times (fresh seeds; a fresh bundled simulator each) into one folder, and "
                   "report each metric's mean with its 95% interval.")
@export_options
@peer_options
@scenario_options
@guarded
def run(scenario_path: Path | None, endpoint: str | None, base_url: str | None, model: str | None, api: str | None,
        api_key_env: str | None, reports_dir: Path, pin: bool, progress: str, repeat: int, shaping: ScenarioFlags,
        split: SplitFlags, quick: QuickFlags, request: RequestFlags, export: ExportFlags, peers: PeerFlags) -> None:
    """Run SCENARIO (default scenarios/quickstart.yaml), or a quick run from flags (--rate, --concurrency,
    --batch), and report each phase side by side."""
    endpoint, api = endpoint_url(endpoint, base_url, api)
    display = make_display(progress)
    scenario, headers = run_scenario_of(scenario_path, quick, peers, api, shaping, export, request, display)
    sharding = sharding_of(split, repeat, display)
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
    exit_of(results)


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
        report_run(result, died, display, metrics)
        if died or result.summary.run.stopped:
            break
    if parent is not None and not died:
        click.echo(f"\n{write_repeats(parent, [r.summary for r in results])}\n\nrepeats: {parent}")
    return results, died


async def _run(scenario: Scenario, run_dir: Path, url: str | None, model: str | None, api: str | None,
               key: str | None, headers: Headers, pin: bool, display: Display, metrics: LiveMetrics | None,
               sharding: Sharding | None = None) -> RunResult:
    async with target(scenario, url=url, model=model, api=api, api_key=key, headers=headers, pin=pin,
                      voice=display) as (endpoint, bundled):
        for line in plan_lines(scenario, endpoint, bundled, run_dir):
            display.say(line)
        return await run_scenario(scenario, endpoint, run_dir, bundled=bundled, display=display,
                                  ceiling_tokens_per_s=ceiling_tokens_per_s(), metrics=metrics, sharding=sharding)
