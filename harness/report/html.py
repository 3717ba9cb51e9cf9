"""One self-contained HTML report that opens offline: what was run, the workload's lengths, the table and
its notes, latency CDFs and sweep curves (matplotlib PNGs), and each phase over time as interactive charts
(report.charts): every request a point to hover, rates in bins that fit the phase, requests in flight,
failures when any, and the server's scraped side. Nothing is fetched when the page is viewed."""

from __future__ import annotations

import base64
import html
import io
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.clock import NS_PER_MS
from harness.records import RequestRecord
from harness.report.charts import assets, chart_html, over_time, per_request, server_side
from harness.report.notes import notes
from harness.report.table import render_table, sweep_points
from harness.stats.conclusion import knee as knee_of
from harness.stats.metrics import e2e_ns, itl_samples_ns, ttft_ns
from harness.stats.schema import PhaseSummary
from harness.stats.server import Row

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px;white-space:pre-wrap}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}img.small{max-width:760px}
.chart{margin:0.8em 0}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}.note{color:#555}.warn{color:#a33}
.facts th{text-align:left;padding-right:1em;color:#555;font-weight:normal}"""


def png_data(fig: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def _cdfs(by_phase: dict[str, list[RequestRecord]]) -> str:
    fig, axes = pyplot().subplots(1, 3, figsize=(12, 3.6))
    positive = [False, False, False]  # log scale only where something lies above zero
    for name, recs in by_phase.items():
        ok = [r for r in recs if r.status == "ok"]
        series = {
            "TTFT": [v for r in ok if (v := ttft_ns(r)) is not None],
            "ITL": [v for r in ok for v in itl_samples_ns(r)],
            "E2E": [v for r in ok if (v := e2e_ns(r)) is not None],
        }
        for i, (ax, values) in enumerate(zip(axes, series.values(), strict=True)):
            if values:
                x = np.sort(np.asarray(values, dtype=np.float64)) / NS_PER_MS
                ax.plot(x, np.arange(1, len(x) + 1) / len(x), label=name, linewidth=1.2)
                positive[i] |= bool(x[-1] > 0)
    for i, (ax, label) in enumerate(zip(axes, ("TTFT", "ITL", "E2E"), strict=True)):
        if label != "E2E" and positive[i]:  # TTFT and ITL span decades; E2E sits in one
            ax.set_xscale("log")
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("fraction of requests" if label == "TTFT" else "")
        ax.grid(alpha=0.3)
    _plain_ticks(*axes)
    if axes[0].get_legend_handles_labels()[1]:  # a phase where every request failed has no curve
        axes[0].legend(fontsize=8)
    return png_data(fig)


def _plain_ticks(*axes: Any) -> None:
    """Tick labels as plain numbers (400, 1,000), never 4×10²: a log axis included."""
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 10 else f"{v:g}")
    for ax in axes:
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(fmt)
            axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _workload(by_phase: dict[str, list[RequestRecord]]) -> str:
    """The lengths the run sent and got back, as two small histograms per phase."""
    fig, (ax_in, ax_out) = pyplot().subplots(1, 2, figsize=(9, 2.4))
    lengths = {name: ([r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested for r in recs],
                      [r.delivered_tokens for r in recs if r.status == "ok"]) for name, recs in by_phase.items()}
    for k, ax in enumerate((ax_in, ax_out)):
        every = [v for pair in lengths.values() for v in pair[k]]
        if not every:
            continue
        lo, hi = min(every), max(every)
        # Bins shared by the phases; a fixed length is one narrow bar with its own tick, not a full-width block.
        edges = np.linspace(lo * 0.9, hi * 1.1 + 1, 22) if lo == hi else np.histogram_bin_edges(
            every, bins=min(40, len(set(every))))
        for name, pair in lengths.items():
            if pair[k]:
                ax.hist(pair[k], bins=edges, histtype="step", label=name, linewidth=1.2)
        if lo == hi:
            ax.set_xticks([lo])
    for ax, label in ((ax_in, "prompt tokens (the server's count where it gave one)"),
                      (ax_out, "output tokens received (ok requests)")):
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("requests", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    _plain_ticks(ax_in, ax_out)
    if len(by_phase) > 1 and ax_in.get_legend_handles_labels()[1]:
        ax_in.legend(fontsize=7)
    return png_data(fig)


def knee(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sweep's capacity under the SLOs (`harness.stats.conclusion.knee`)."""
    best = knee_of([PhaseSummary.model_validate(p) for p in points])
    return None if best is None else best.to_json()


def _sweep_curve(name: str, points: list[dict[str, Any]], slo: dict[str, Any]) -> str:
    fig, axes = pyplot().subplots(1, 2, figsize=(12, 3.8))
    x = [p["throughput"]["output_tokens_per_s"] for p in points]
    best = knee(points)
    for ax, metric, limit in ((axes[0], "ttft", slo.get("ttft_ms")), (axes[1], "tpot", slo.get("tpot_ms"))):
        for q, style in (("p50", "-o"), ("p99", "--o")):
            ax.plot(x, [p["latency_ms"][metric][q] for p in points], style, label=f"{metric.upper()} {q}",
                    markersize=4)
        if limit is not None:
            ax.axhline(limit, color="#d62728", linewidth=0.9, label=f"SLO {limit:g} ms")
        if best is not None:
            ax.axvline(best["throughput"]["output_tokens_per_s"], color="#2ca02c", linewidth=0.9, linestyle=":",
                       label="knee (last point ≥ 95% goodput)")
        ax.set_yscale("log")
        _plain_ticks(ax)
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(f"{metric.upper()} (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"sweep {name}: latency against throughput", fontsize=10)
    return png_data(fig)


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


def _phase_charts(by_phase: dict[str, list[RequestRecord]], rows: Sequence[Row]) -> list[str]:
    """Each phase over time, interactive: its requests, rates, in flight, failures, and the server's side."""
    parts: list[str] = []
    ids = itertools.count()
    for name, recs in by_phase.items():
        t0 = min(r.intended_ns for r in recs)
        end = max(r.end_ns for r in recs)
        inside = [r for r in rows if t0 <= r.t_ns <= end]
        specs = [per_request(recs, t0), *over_time(recs, t0), *(server_side(inside, t0) if len(inside) >= 2 else [])]
        parts.append(f"<h2>Phase {html.escape(name)} over time</h2><p class='note'>Drag across a chart to zoom "
                     f"into a burst, double-click to zoom out; hover a point to name its request.</p>")
        parts += [chart_html(spec, next(ids)) for spec in specs if spec is not None]
    return parts


def render_html(summary: dict[str, Any], records: Sequence[RequestRecord], rows: Sequence[Row] = ()) -> str:
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in records:
        by_phase.setdefault(rec.phase, []).append(rec)
    run = summary.get("run", {})
    title = f"harness report: {run.get('scenario', '')}"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style>{assets()}</head><body><h1>{html.escape(title)}</h1>",
             _header(summary)]
    if records:
        parts.append(f"<img class='small' alt='workload: prompt and output lengths' src='{_workload(by_phase)}'>")
    parts += [f"<pre>{html.escape(render_table(summary))}</pre>",
              *(f"<p class='warn'>{html.escape(line)}</p>" for line in notes(summary))]
    if any(r.status == "ok" for r in records):  # no curve to draw when nothing succeeded
        parts += ["<h2>Latency distributions</h2>", f"<img alt='latency CDFs' src='{_cdfs(by_phase)}'>"]
    slo = summary["phases"][0]["goodput"]["slo"] if summary.get("phases") else {}
    for name, points in sweep_points(summary).items():
        best = knee(points)
        capacity = (f"capacity under the SLOs: {best['name']} at {best['throughput']['output_tokens_per_s']:,.0f} "
                    f"output tokens/s" if best else "no point of the sweep met the SLOs")
        parts += [f"<h2>Sweep {html.escape(name)}</h2><p>{html.escape(capacity)}</p>",
                  f"<img alt='sweep {html.escape(name)}' src='{_sweep_curve(name, points, slo)}'>"]
    parts += _phase_charts(by_phase, rows)
    parts.append("</body></html>\n")
    return "\n".join(parts)
