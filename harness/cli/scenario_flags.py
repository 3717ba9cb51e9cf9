"""The scenario `harness run` runs, from its command line: the file (or the scenario the quick flags describe)
with what every other flag group changes in it, each group read into the sections it changes and the scenario
validated once with all of them; a problem only the whole scenario shows is said naming the flag that made it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from harness.cli.common import Duration
from harness.cli.flag_groups import with_group
from harness.cli.output_flags import ExportFlags, export_changes
from harness.cli.peer_flags import PeerFlags
from harness.cli.quick_flags import QuickFlags, flag_scenario, threshold_changes, workload_changes
from harness.cli.request_flags import Headers, RequestFlags, endpoint_of
from harness.config.problems import problems
from harness.config.scenario import Scenario, parse_hardware
from harness.voice import Voice

F = TypeVar("F", bound=Callable[..., Any])

# Which flag set each top-level field a whole-scenario check can refuse (the file's own fields were checked
# when it was read).
_FLAG_OF = {"thresholds": "--threshold", "labels": "--label", "metadata": "--metadata",
            "pushgateway": "--pushgateway", "metrics_port": "--metrics-port", "metrics_hold_s": "--metrics-hold",
            "endpoint": "--endpoint", "workload": "--tokenizer", "phases": "--skip-bad-rows"}


@dataclass(frozen=True)
class ScenarioFlags:
    """The flags of `harness run` that change the scenario's own sections, beside the quick-run, request and
    export groups (None: not given)."""

    wait: float | None = None
    accelerator: str | None = None
    hardware: str | None = None
    tokenizer: str | None = None
    skip_bad_rows: bool = False
    thresholds: tuple[str, ...] = ()


def scenario_options(command: F) -> F:
    """`harness run`'s flags that change the scenario's own sections, handed to it as `shaping: ScenarioFlags`."""
    options = [
        click.option("--wait-for-endpoint", "wait", type=Duration(), metavar="DURATION",
                     help="Keep asking the endpoint for its models this long while it does not answer (a server still "
                          "starting), before giving up (exit 3)."),
        click.option("--accelerator", metavar="TEXT",
                     help="What the endpoint runs on (e.g. '8xH100, TP 8'), for the report's header."),
        click.option("--hardware", metavar="PRESET[,model=M][,tp=N][,dtype=fp8]",
                     help="What the endpoint runs on, as presets (`harness sim presets`): each phase then gets an "
                          "estimate of its memory-bandwidth and compute utilisation (MBU, MFU)."),
        click.option("--tokenizer", metavar="PATH|server|words",
                     help="Prompts of exact length on a real model: a local Hugging Face tokenizer (directory or "
                          "tokenizer.json, never downloaded), 'server' to count with the endpoint's own /tokenize, or "
                          "'words' for the harness's words as they are. Default: the endpoint's /tokenize where it "
                          "has one."),
        click.option("--skip-bad-rows", is_flag=True,
                     help="Trace phases: skip unreadable rows (counted in summary.json) instead of stopping."),
        click.option("--threshold", "thresholds", multiple=True, metavar="EXPR",
                     help="Pass/fail on every phase, e.g. 'ttft_p99<500ms' or 'error_rate<1%' (repeatable; any broken: "
                          "exit 99). Metrics: docs/scenarios.md."),
    ]
    return with_group(command, "shaping", ScenarioFlags, options)


def run_scenario_of(path: Path | None, quick: QuickFlags, peers: PeerFlags, api: str | None, flags: ScenarioFlags,
                    export: ExportFlags, request: RequestFlags, voice: Voice) -> tuple[Scenario, Headers]:
    """The scenario to run and the headers' values to send."""
    base = flag_scenario(path, quick, peers, api)
    endpoint, headers = endpoint_of(base, request, voice, api, _endpoint_fields(flags))
    changes = {"endpoint": endpoint, **workload_changes(base, flags.tokenizer, flags.skip_bad_rows),
               **threshold_changes(base, flags.thresholds), **export_changes(base, export)}
    try:
        return base.changed(**changes), headers
    except ValidationError as exc:
        flag = _FLAG_OF.get(str(exc.errors()[0]["loc"][0]), "SCENARIO") if exc.errors()[0]["loc"] else "SCENARIO"
        raise click.BadParameter(problems(exc, flag).removeprefix(f"{flag}: "), param_hint=flag) from None


def _endpoint_fields(flags: ScenarioFlags) -> dict[str, object]:
    """What --accelerator, --hardware and --wait-for-endpoint set in the endpoint section."""
    given: dict[str, object] = {k: v for k, v in (("accelerator", flags.accelerator), ("wait_s", flags.wait))
                                if v is not None}
    if flags.hardware is not None:
        try:
            given["hardware"] = parse_hardware(flags.hardware)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--hardware") from None
    return given
