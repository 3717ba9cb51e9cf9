"""`harness trace inspect|convert`: request traces looked at and turned into generic JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import click

from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.workload.traces import read_trace


@click.group()
def trace() -> None:
    """Request traces: inspect and convert."""


_format_option = click.option("--format", "fmt", type=click.Choice(["azure", "mooncake", "burstgpt", "generic"]),
                              default=None, help="Default: recognised from the first line.")


_EXAMPLES1 = examples(
    'harness trace inspect scenarios/traces/AzureLLMInferenceTrace_conv.csv.gz --png arrivals.png',
)


@trace.command("inspect", epilog=_EXAMPLES1)
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@_format_option
@click.option("--skip-bad-rows", is_flag=True, help="Skip and count unreadable rows instead of stopping.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option("--png", type=click.Path(path_type=Path, dir_okay=False), help="Also plot arrivals per second here.")
@guarded
def trace_inspect(path: Path, fmt: str | None, skip_bad_rows: bool, as_json: bool, png: Path | None) -> None:
    """Rows, span, mean rate, inter-arrival CV and length percentiles of a trace file."""
    loaded = read_trace(path, fmt, skip_bad=skip_bad_rows)  # type: ignore[arg-type]
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


_EXAMPLES2 = examples(
    'harness trace convert scenarios/traces/mooncake_conversation_trace.jsonl.gz mooncake.csv',
)


@trace.command("convert", epilog=_EXAMPLES2)
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("target", type=click.Path(path_type=Path, dir_okay=False))
@_format_option
@click.option("--skip-bad-rows", is_flag=True)
@guarded
def trace_convert(source: Path, target: Path, fmt: str | None, skip_bad_rows: bool) -> None:
    """Write any trace as generic JSONL (timestamp s, input_tokens, output_tokens[, hash_ids, session])."""
    rows = read_trace(source, fmt, skip_bad=skip_bad_rows).rows  # type: ignore[arg-type]
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
