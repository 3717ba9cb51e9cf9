"""One self-contained HTML report that opens offline: what was run, the workload's lengths, the table and
its notes, latency CDFs, sweep curves, and each phase over time — every chart drawn in the page by uPlot from
the specs of report.charts: every request a point to hover, rates in bins that fit the phase, requests in
flight, failures when any, and the server's scraped side. Nothing is fetched when the page is viewed."""

from __future__ import annotations

import html
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from harness.records import RequestRecord
from harness.report.charts import (
    assets,
    cdf_specs,
    chart_html,
    over_time,
    per_request,
    server_side,
    sweep_specs,
    workload_specs,
)
from harness.report.notes import notes
from harness.report.table import render_table, sweep_points
from harness.stats.conclusion import knee as knee_of
from harness.stats.schema import PhaseSummary
from harness.stats.server import Row

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px;white-space:pre-wrap}
.chart{margin:0.8em 0}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}.note{color:#555}.warn{color:#a33}
.facts th{text-align:left;padding-right:1em;color:#555;font-weight:normal}"""


def knee(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sweep's capacity under the SLOs (`harness.stats.conclusion.knee`)."""
    best = knee_of([PhaseSummary.model_validate(p) for p in points])
    return None if best is None else best.to_json()


def header_facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """What the page opens with: which run, against what, asking for what, and how it ended."""
    run = summary.get("run", {})
    endpoint = run.get("endpoint") or {}
    sim = run.get("simulator") or {}
    declared = f" ({endpoint['accelerator']}, as declared)" if endpoint.get("accelerator") else ""
    target = (f"simulated {sim.get('accelerator')} running {sim.get('model')} (bundled)" if endpoint.get(
        "bundled_simulator") or run.get("mode") == "predict" else endpoint.get("base_url", "") + declared)
    phases = summary.get("phases", [])
    first = phases[0] if phases else {}
    slo = (first.get("goodput") or {}).get("slo") or {}
    limits = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in slo.items() if v is not None) or "none"
    span = sum(p["whole_run"]["window"]["duration_s"] for p in phases)
    ended = "complete" if run.get("complete", True) else (
        f"stopped by {run['stopped']}" if run.get("stopped") else "incomplete")
    return [("run", f"{run.get('run_id', '')} · {run.get('started_at') or run.get('mode', '')}"),
            ("model", str(endpoint.get("model") or sim.get("model") or "")), ("target", str(target)),
            ("phases", ", ".join(p["name"] for p in phases) + f" · {span:,.1f} s in all"),
            ("SLOs", limits), ("ended", ended)]


def _header(summary: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in header_facts(summary))
    return f"<table class='facts'>{rows}</table>"


def _phase_charts(by_phase: dict[str, list[RequestRecord]], rows: Sequence[Row],
                  ids: Iterator[int], every: int) -> list[str]:
    """Each phase over time, interactive: its requests, rates, in flight, failures, and the server's side."""
    parts: list[str] = []
    for name, recs in by_phase.items():
        t0 = min(r.intended_ns for r in recs)
        end = max(r.end_ns for r in recs)
        inside = [r for r in rows if t0 <= r.t_ns <= end]
        specs = [per_request(recs, t0), *over_time(recs, t0, every),
                 *(server_side(inside, t0) if len(inside) >= 2 else [])]
        parts.append(f"<h2>Phase {html.escape(name)} over time</h2><p class='note'>Drag across a chart to zoom "
                     f"into a burst, double-click to zoom out; hover a point to name its request.</p>")
        parts += [chart_html(spec, next(ids)) for spec in specs if spec is not None]
    return parts


def render_html(summary: dict[str, Any], records: Sequence[RequestRecord], rows: Sequence[Row] = (),
                every: int = 1) -> str:
    """The page; `every` > 1: `records` holds 1 record in `every` (a run past client.records_in_memory)."""
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in records:
        by_phase.setdefault(rec.phase, []).append(rec)
    run = summary.get("run", {})
    title = f"harness report: {run.get('scenario', '')}"
    ids = itertools.count()
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style>{assets()}</head><body><h1>{html.escape(title)}</h1>",
             _header(summary),
             *(chart_html(spec, next(ids), small=True) for spec in workload_specs(by_phase)),
             f"<pre>{html.escape(render_table(summary))}</pre>",
             *(f"<p class='warn'>{html.escape(line)}</p>" for line in notes(summary))]
    cdfs = cdf_specs(by_phase)  # none when nothing succeeded: no empty charts
    if cdfs:
        parts += ["<h2>Latency distributions</h2>", *(chart_html(spec, next(ids), small=True) for spec in cdfs)]
    slo = summary["phases"][0]["goodput"]["slo"] if summary.get("phases") else {}
    for name, points in sweep_points(summary).items():
        best = knee(points)
        capacity = (f"capacity under the SLOs: {best['name']} at {best['throughput']['output_tokens_per_s']:,.0f} "
                    f"output tokens/s" if best else "no point of the sweep met the SLOs")
        parts += [f"<h2>Sweep {html.escape(name)}</h2><p>{html.escape(capacity)}</p>",
                  *(chart_html(spec, next(ids)) for spec in sweep_specs(name, points, slo, best))]
    if every > 1:
        parts.append(f"<p class='note'>The charts below draw 1 record in {every} (the run ended more than "
                     "client.records_in_memory); rates and requests in flight count each drawn record "
                     f"{every} times. The table's figures are from every record.</p>")
    parts += _phase_charts(by_phase, rows, ids, every)
    parts.append("</body></html>\n")
    return "\n".join(parts)
