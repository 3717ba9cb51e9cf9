"""One self-contained HTML report: the summary table, the conclusion, and plots embedded as PNG data.

Plots (matplotlib, rendered to files only): latency CDFs (TTFT, ITL, E2E) per phase; TTFT and ITL
over time against the arrival rate; output throughput, requests in flight, schedule lag and failures by
status over time; and,
when the endpoint's `/metrics` was scraped, the server's running and waiting requests, KV cache usage
and generated tokens/s beside the client's. Nothing is fetched when the page is viewed.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.records import RequestRecord
from harness.report.notes import notes
from harness.report.table import render_table, sweep_points
from harness.stats.conclusion import knee as knee_of
from harness.stats.metrics import e2e_ns, in_flight, itl_samples_ns, ttft_ns
from harness.stats.schema import PhaseSummary
from harness.stats.server import Row, rates

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px;white-space:pre-wrap}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}.note{color:#555}.warn{color:#a33}
.facts th{text-align:left;padding-right:1em;color:#555;font-weight:normal}"""


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def _cdfs(by_phase: dict[str, list[RequestRecord]]) -> str:
    fig, axes = _pyplot().subplots(1, 3, figsize=(12, 3.6))
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
    if axes[0].get_legend_handles_labels()[1]:  # a phase where every request failed has no curve
        axes[0].legend(fontsize=8)
    return _png(fig)


def _per_second(times_ns: Sequence[int] | np.ndarray, t0: int, seconds: int) -> np.ndarray:
    """How many of the instants fall in each whole second after t0."""
    offsets = (np.asarray(times_ns, dtype=np.float64) - t0) / NS_PER_S
    return np.bincount(np.clip(offsets, 0, None).astype(int), minlength=seconds)[:seconds]


def _over_time(records: Sequence[RequestRecord], t0: int) -> str:
    ok = [r for r in records if r.status == "ok" and r.first_token_ns is not None and r.sent_ns is not None]
    fig, axes = _pyplot().subplots(3, 2, figsize=(12, 8.4))
    ax_ttft, ax_itl, ax_tput, ax_flight, ax_lag, ax_err = axes.ravel()
    if ok:
        sent_s = np.array([(r.sent_ns or 0) - t0 for r in ok]) / NS_PER_S
        ax_ttft.scatter(sent_s, [(ttft_ns(r) or 0) / NS_PER_MS for r in ok], s=4)
        itl = [(np.mean(itl_samples_ns(r)) / NS_PER_MS) if len(r.chunk_ns) > 1 else np.nan for r in ok]
        ax_itl.scatter(sent_s, itl, s=4, color="#2ca02c")
    seconds = int(np.ceil((max(r.end_ns for r in records) - t0) / NS_PER_S)) + 1
    rate = _per_second([r.intended_ns for r in records], t0, seconds)
    for ax in (ax_ttft, ax_itl):
        twin = ax.twinx()
        twin.step(np.arange(seconds), rate, where="post", color="#999", linewidth=0.8)
        twin.set_ylabel("arrivals/s", color="#999")
    per_s = _client_tokens_per_s(records, t0)
    if per_s.size:
        ax_tput.plot(np.arange(len(per_s)), per_s, color="#9467bd")
    flight_t, flight_n = in_flight(records)
    ax_flight.step((flight_t - t0) / NS_PER_S, flight_n, where="post", color="#17becf")
    sent = [r for r in records if r.sent_ns is not None]
    ax_lag.scatter([(r.intended_ns - t0) / NS_PER_S for r in sent],
                   [((r.sent_ns or 0) - r.intended_ns) / NS_PER_MS for r in sent], s=4, color="#ff7f0e")
    for status in sorted({r.status for r in records} - {"ok"}):
        ax_err.step(np.arange(seconds), _per_second([r.end_ns for r in records if r.status == status], t0, seconds),
                    where="post", label=status)
    if ax_err.get_legend_handles_labels()[1]:
        ax_err.legend(fontsize=8)
    else:
        ax_err.text(0.5, 0.5, "no errors", transform=ax_err.transAxes, ha="center", color="#2ca02c")
    return _time_panels(fig, ((ax_ttft, "TTFT over time", "ms"), (ax_itl, "mean ITL per request", "ms"),
                              (ax_tput, "output tokens per second", "tokens/s"),
                              (ax_flight, "requests in flight (sent, not ended)", "requests"),
                              (ax_lag, "schedule lag (sent − intended)", "ms"),
                              (ax_err, "failed requests per second, by status", "requests/s")))


def _time_panels(fig: Any, panels: Sequence[tuple[Any, str, str]]) -> str:
    """Titles, units and a grid on panels whose x axis is seconds into the phase; the figure as PNG data."""
    for ax, title, unit in panels:
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    return _png(fig)


def _client_tokens_per_s(records: Sequence[RequestRecord], t0: int) -> np.ndarray:
    """Token-bearing chunks received per whole second after t0, from successful requests."""
    chunks = np.concatenate([np.asarray(r.chunk_ns) for r in records if r.status == "ok"] or [np.zeros(0)])
    return np.bincount(((chunks[chunks >= t0] - t0) / NS_PER_S).astype(int))


def _server(rows: Sequence[Row], records: Sequence[RequestRecord], t0: int) -> str:
    fig, (ax_queue, ax_kv, ax_tokens) = _pyplot().subplots(1, 3, figsize=(12, 3.4))
    t = np.array([r.t_ns - t0 for r in rows]) / NS_PER_S
    for name, color in (("running", "#1f77b4"), ("waiting", "#d62728")):
        ax_queue.step(t, [r.values.get(name, np.nan) for r in rows], where="post", label=name, color=color)
    ax_queue.legend(fontsize=8)
    ax_kv.plot(t, [100 * r.values.get("kv_cache_usage", np.nan) for r in rows], color="#8c564b")
    times, per_s = rates(rows, "generation_tokens_total")
    ax_tokens.plot((np.asarray(times) - t0) / NS_PER_S, per_s, label="server generated", color="#9467bd")
    client = _client_tokens_per_s(records, t0)
    if client.size:
        ax_tokens.step(np.arange(len(client)), client, where="post", label="client received", color="#bbb")
    ax_tokens.legend(fontsize=8)
    return _time_panels(fig, ((ax_queue, "server: requests running and waiting", "requests"),
                              (ax_kv, "server: KV cache usage", "%"),
                              (ax_tokens, "output tokens per second", "tokens/s")))


def sweep_groups(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Phases expanded from one sweep, grouped by the phase they came from (`report.table.sweep_points`)."""
    return sweep_points(summary)


def knee(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sweep's capacity under the SLOs (`harness.stats.conclusion.knee`)."""
    best = knee_of([PhaseSummary.model_validate(p) for p in points])
    return None if best is None else best.to_json()


def _sweep_curve(name: str, points: list[dict[str, Any]], slo: dict[str, Any]) -> str:
    fig, axes = _pyplot().subplots(1, 2, figsize=(12, 3.8))
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
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(f"{metric.upper()} (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"sweep {name}: latency against throughput", fontsize=10)
    return _png(fig)


def header_facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """What the page opens with: which run, against what, asking for what, and how it ended."""
    run = summary.get("run", {})
    endpoint = run.get("endpoint") or {}
    sim = run.get("simulator") or {}
    target = (f"simulated {sim.get('accelerator')} running {sim.get('model')} (bundled)" if endpoint.get(
        "bundled_simulator") or run.get("mode") == "predict" else endpoint.get("base_url", ""))
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


def render_html(summary: dict[str, Any], records: Sequence[RequestRecord], rows: Sequence[Row] = ()) -> str:
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in records:
        by_phase.setdefault(rec.phase, []).append(rec)
    run = summary.get("run", {})
    title = f"harness report: {run.get('scenario', '')}"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             _header(summary),
             f"<pre>{html.escape(render_table(summary))}</pre>",
             *(f"<p class='warn'>{html.escape(line)}</p>" for line in notes(summary)),
             "<h2>Latency distributions</h2>", f"<img alt='latency CDFs' src='{_cdfs(by_phase)}'>"]
    slo = summary["phases"][0]["goodput"]["slo"] if summary.get("phases") else {}
    for name, points in sweep_groups(summary).items():
        best = knee(points)
        capacity = (f"capacity under the SLOs: {best['name']} at {best['throughput']['output_tokens_per_s']:,.0f} "
                    f"output tokens/s" if best else "no point of the sweep met the SLOs")
        parts += [f"<h2>Sweep {html.escape(name)}</h2><p>{html.escape(capacity)}</p>",
                  f"<img alt='sweep {html.escape(name)}' src='{_sweep_curve(name, points, slo)}'>"]
    for name, recs in by_phase.items():
        t0 = min(r.intended_ns for r in recs)
        parts += [f"<h2>Phase {html.escape(name)} over time</h2>",
                  f"<img alt='{html.escape(name)} over time' src='{_over_time(recs, t0)}'>"]
        end = max(r.end_ns for r in recs)
        inside = [r for r in rows if t0 <= r.t_ns <= end]
        if len(inside) >= 2:
            parts.append(f"<img alt='{html.escape(name)} server side' src='{_server(inside, recs, t0)}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
