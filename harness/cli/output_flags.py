"""`harness run`'s output flags: the live exporter (--metrics-port), the Pushgateway (--pushgateway), and the
run's tags (--label, --metadata) that go with both and with every file the run writes."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

from harness.cli.common import Duration
from harness.cli.flag_groups import with_group
from harness.config.base import web_url
from harness.config.labels import check_labels, check_metadata, parse_label
from harness.config.scenario import Pushgateway, Scenario
from harness.errors import UsageError
from harness.redact import redactor
from harness.report.exports import write_vllm
from harness.report.pushgateway import push_summary
from harness.run.exporter import LiveMetrics
from harness.run.result import RunResult
from harness.voice import Reworded, Voice
from harness.yamlfile import read_yaml

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ExportFlags:
    """Where the run's figures go beyond its folder, and the tags they carry."""

    metrics_port: int | None = None
    metrics_hold_s: float | None = None
    pushgateway: str | None = None
    pushgateway_job: str | None = None
    pushgateway_label: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    metadata: Path | None = None
    save_result: bool = False
    output_json: Path | None = None


def export_options(command: F) -> F:
    """The output flags, handed to the command as `export: ExportFlags`."""
    options = [
        click.option("--metrics-port", type=click.IntRange(0, 65535), metavar="PORT",
                     help="Serve the harness's own Prometheus metrics on this port while the run lasts (0: off)."),
        click.option("--metrics-hold", "metrics_hold_s", type=Duration(), metavar="DURATION",
                     help="Keep serving them this long after the run, for a last scrape (e.g. 15s)."),
        click.option("--pushgateway", metavar="URL", help="Push the run's summary to this Pushgateway when it ends."),
        click.option("--pushgateway-job", metavar="NAME", help="The push's job label (default: harness)."),
        click.option("--pushgateway-label", multiple=True, metavar="K=V",
                     help="A grouping label for the push (repeatable), e.g. branch=main."),
        click.option("--label", "labels", multiple=True, metavar="K=V",
                     help="Tag the run (repeatable), e.g. engine=vllm-0.32: in summary.json, report.html, `harness "
                          "export`, the history and the metrics' harness_run_labels."),
        click.option("--metadata", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
                     help="A flat YAML/JSON mapping of facts about the run (commit, driver, …), kept in summary.json "
                          "and the exports."),
        click.option("--save-result", is_flag=True,
                     help="As vLLM's bench: also write each phase's result in vLLM's JSON (vllm-<run>-<phase>.json) "
                          "in the run's folder (`harness export --format vllm` does it later)."),
        click.option("--output-json", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
                     help="Also write the run's summary.json to FILE (with --repeat: a list, one per run)."),
    ]
    return with_group(command, "export", ExportFlags, options)


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise click.BadParameter(f"{pair!r}: give KEY=VALUE, KEY a label name", param_hint="--pushgateway-label")
        labels[key] = value
    return labels


def _push_url(given: str) -> str:
    try:
        url = web_url(given)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--pushgateway") from None
    if "@" in urlsplit(given if "://" in given else f"http://{given}").netloc:
        click.echo("--pushgateway: the user:password@ in the URL is dropped (never sent, printed or saved)", err=True)
    return url


def tag_changes(scenario: Scenario, labels: tuple[str, ...], metadata: Path | None) -> dict[str, object]:
    """The scenario's `labels` with --label pairs over them and its `metadata` with --metadata's mapping over
    it; a bad one is a BadParameter naming its flag."""
    if not labels and metadata is None:
        return {}
    try:
        given = dict(parse_label(text) for text in labels)
        tags = {**scenario.labels, **check_labels(given)}
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--label") from None
    facts = dict(scenario.metadata)
    if metadata is not None:
        try:
            data = read_yaml(metadata)
        except ValueError as exc:
            raise click.BadParameter(f"{metadata}: {exc}", param_hint="--metadata") from None
        if not isinstance(data, dict):
            raise click.BadParameter(f"{metadata}: expected a mapping of names to values", param_hint="--metadata")
        try:
            facts |= check_metadata(data)
        except ValueError as exc:
            raise click.BadParameter(f"{metadata}: {exc}", param_hint="--metadata") from None
    return {"labels": tags, "metadata": facts}


def export_changes(scenario: Scenario, flags: ExportFlags) -> dict[str, object]:
    """The scenario's fields the export flags given on the command line change, with their new values."""
    update = tag_changes(scenario, flags.labels, flags.metadata)
    if flags.metrics_port is not None:
        update["metrics_port"] = flags.metrics_port
    if flags.metrics_hold_s is not None:
        update["metrics_hold_s"] = flags.metrics_hold_s
    push = scenario.pushgateway
    if flags.pushgateway is not None:
        push = Pushgateway(url=_push_url(flags.pushgateway), **(push.model_dump(exclude={"url"}) if push else {}))
    if push is None and (flags.pushgateway_job or flags.pushgateway_label):
        raise click.BadParameter("needs --pushgateway URL (or pushgateway: in the scenario)",
                                 param_hint="--pushgateway-job" if flags.pushgateway_job else "--pushgateway-label")
    if push is not None:
        labels = {**push.labels, **_labels(flags.pushgateway_label)}
        update["pushgateway"] = push.changed(job=flags.pushgateway_job or push.job, labels=labels)
    return update


@contextlib.contextmanager
def live_metrics(scenario: Scenario, shard: str = "") -> Iterator[LiveMetrics | None]:
    """The exporter, serving while the block runs (and `metrics_hold_s` after it, when it ended well).
    `shard`: "i/N" for a shard by hand, the `shard` label of every series (a dashboard sums over it)."""
    if not scenario.metrics_port:
        yield None
        return
    metrics = LiveMetrics(scenario.name, shard, scenario.labels)
    try:
        metrics.serve(scenario.metrics_port)
    except OSError as exc:
        raise UsageError(f"--metrics-port {scenario.metrics_port}: cannot serve there ({exc.strerror})") from None
    try:
        yield metrics
        time.sleep(scenario.metrics_hold_s)
    finally:
        metrics.close()


def after_run(scenario: Scenario, results: list[RunResult], key: str | None, voice: Voice,
              flags: ExportFlags) -> None:
    """What the runs of this command (one, or every repeat) leave beyond their folders: one push, vLLM's
    result files (--save-result), a copy of the summary (--output-json)."""
    summaries = [r.summary for r in results]
    if scenario.pushgateway is not None:
        push_summary(scenario.pushgateway, summaries, Reworded(voice, redactor(key)))
    if flags.save_result:
        for result in results:
            write_vllm(result.summary, result.records, result.run_dir)
    if flags.output_json is not None and summaries:
        data = [s.to_json() for s in summaries] if len(summaries) > 1 else summaries[0].to_json()
        try:
            flags.output_json.write_text(json.dumps(data, indent=2), encoding="utf-8")
        except OSError as exc:
            voice.warn(f"--output-json {flags.output_json}: not written ({exc.strerror}); the run's folder has it")
