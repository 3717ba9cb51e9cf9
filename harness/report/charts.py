"""The report's interactive charts over time: each request as a point (hover names it), rates in bins that
fit the phase's length, requests in flight, failures when there are any, and the server's scraped side.

Drawn in the page by uPlot (MIT, vendored in report/vendor: 50 kB, inlined, so the page stays one file
that opens offline) through charts.js; this module only turns records into chart specs.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.config.metric_registry import CHARTED, LATENCIES, SLO_LATENCIES, Latency
from harness.config.scenario import SLO
from harness.records import RequestRecord
from harness.stats.metrics import e2e_ns, in_flight, itl_array_ns, ttft_ns
from harness.stats.schema import PhaseSummary
from harness.stats.server import Row, rates

AXIS_FLOOR_MS = 0.1  # latency axes start no lower: below it is a read's granularity, not a latency
MAX_POINTS = 20_000  # per-request points a chart carries; beyond, a stride of them plus the slowest
_BINS = 40  # about this many bins across a phase, whatever its length
_NICE_S = (0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)

Spec = dict[str, Any]


def assets() -> str:
    """uPlot, its stylesheet and charts.js, inlined once per page."""
    here = resources.files("harness.report")
    css = (here / "vendor" / "uPlot.min.css").read_text(encoding="utf-8")
    js = (here / "vendor" / "uPlot.iife.min.js").read_text(encoding="utf-8")
    glue = (here / "charts.js").read_text(encoding="utf-8")
    # uPlot's legend puts a colon after each name (for its live value) and leaves a line's swatch hollow: off
    # a screenshot both read as empty; charts.js fills the swatches.
    legend = ".u-inline.u-live th::after{content:''} .u-legend .u-marker{border-radius:2px}"
    return f"<style>{css}{legend}</style><script>{js}</script><script>{glue}</script>"


def chart_html(spec: Spec, n: int, small: bool = False) -> str:
    """The chart's place in the page and the call that draws it; `small` ones are shorter (side by side)."""
    data = json.dumps({**spec, "height": 200} if small else spec, separators=(",", ":"),
                      allow_nan=False).replace("</", "<\\/")
    return (f"<div class='chart' id='chart{n}' title='{html.escape(spec['title'])}'></div>"
            f"<script>harnessChart(document.getElementById('chart{n}'), {data});</script>")


def bin_seconds(span_s: float) -> float:
    """A round bin width giving about 40 bins over `span_s`: 0.25 s for a 10 s phase, 2 min for 90 min."""
    want = span_s / _BINS
    return next((b for b in _NICE_S if b >= want), _NICE_S[-1])


def json_values(a: np.ndarray | Sequence[float | None], digits: int = 3, positive: bool = False) -> list[float | None]:
    """JSON numbers: rounded, with gaps (NaN; or ≤ 0 on a log axis) as null."""
    arr = np.asarray(a, dtype=np.float64)
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else False)
    return [None if b else v for v, b in zip(np.round(arr, digits).tolist(), bad.tolist(), strict=True)]


def series_spec(label: str, unit: str, values: Any, *, points: bool = False, log: bool = False,
            step: bool = False, line: bool = False, dash: bool = False, color: str | None = None) -> Spec:
    spec = {"label": label, "unit": unit, "values": json_values(values, positive=log), "points": points, "log": log,
            "step": step, "line": line, "dash": dash}
    return {**spec, "color": color} if color else spec


def _shown(order: np.ndarray, slowness: np.ndarray) -> np.ndarray:
    """Indices to plot when there are too many: an even stride, plus the slowest (the tail is the story)."""
    if len(order) <= MAX_POINTS:
        return order
    tail = np.argsort(slowness)[-MAX_POINTS // 10:]
    keep = np.union1d(order[:: len(order) // (MAX_POINTS - len(tail)) + 1], tail)
    return keep


def per_request(records: Sequence[RequestRecord], t0: int) -> Spec | None:
    """TTFT and mean ITL of each successful request at its send time; hovering names the request."""
    ok = [r for r in records if r.status == "ok" and r.sent_ns is not None and r.first_token_ns is not None]
    if not ok:
        return None
    sent = np.array([r.sent_ns or 0 for r in ok], dtype=np.int64)
    ttft = np.array([ttft_ns(r) or 0 for r in ok], dtype=np.float64) / NS_PER_MS
    keep = _shown(np.argsort(sent, kind="stable"), ttft)
    keep = keep[np.argsort(sent[keep], kind="stable")]
    itl = [float(s.mean()) / NS_PER_MS if len(s := itl_array_ns(ok[i])) else np.nan for i in keep]
    shown = "" if len(keep) == len(ok) else f" ({len(keep):,} of {len(ok):,} shown: a stride and the slowest)"
    return {"title": f"each request: TTFT and mean ITL by send time{shown}", "xlabel": "s into the phase",
            "x": json_values((sent[keep] - t0) / NS_PER_S), "ids": [ok[i].request_id for i in keep],
            "series": [series_spec("TTFT", "ms", ttft[keep], points=True, log=True),
                       series_spec("mean ITL", "ms", itl, points=True, log=True)]}


def _binned(times_ns: Any, t0: int, width_s: float, bins: int, weights: Any = None, every: int = 1) -> np.ndarray:
    """Per-second rate in each bin: events (or their weights) in the bin / its width."""
    at = ((np.asarray(times_ns, dtype=np.float64) - t0) / NS_PER_S / width_s).astype(np.int64)
    inside = (at >= 0) & (at < bins)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[inside]
    out: np.ndarray = np.bincount(at[inside], weights=w, minlength=bins)[:bins] / width_s * every
    return out


def over_time(records: Sequence[RequestRecord], t0: int, every: int = 1) -> list[Spec]:
    """Rates in bins (arrivals, completions, output tokens), requests in flight, and failures if any; each
    record counted `every` times (a sample of 1 in `every`)."""
    span_s = max(max(r.end_ns for r in records) - t0, 1) / NS_PER_S
    width = bin_seconds(span_s)
    bins = int(np.ceil(span_s / width)) + 1
    x = json_values(np.arange(bins) * width)
    ok = [r for r in records if r.status == "ok"]
    chunks = np.concatenate([np.asarray(r.chunk_ns, dtype=np.int64) for r in ok] or [np.zeros(0, np.int64)])
    # Tokens where each arrived: the server's count per chunk when it gives one (delivered_tokens' rule).
    tokens = np.concatenate([np.asarray(r.chunk_tokens if r.exact_chunk_tokens else np.ones(len(r.chunk_ns)),
                                        dtype=np.float64) for r in ok] or [np.zeros(0)])
    specs = [{"title": f"rates per second, in {width:g} s bins", "xlabel": "s into the phase", "x": x, "series": [
        series_spec("arrivals (intended)", "req/s",
                _binned([r.intended_ns for r in records], t0, width, bins, every=every), step=True),
        series_spec("completed ok", "req/s", _binned([r.end_ns for r in ok], t0, width, bins, every=every), step=True),
        series_spec("output tokens", "tokens/s", _binned(chunks, t0, width, bins, tokens, every), step=True)]}]
    times, counts = in_flight(records)
    counts = counts * every
    if len(times):
        at = np.clip(((times - t0) / NS_PER_S / width).astype(np.int64), 0, bins - 1)
        peak = np.zeros(bins)
        np.maximum.at(peak, at, counts)
        # A bin without an event still holds the level the last event before it left (a batch running for
        # seconds sends and ends nothing in between: it showed as 0 in flight).
        starts = t0 + (np.arange(bins) * width * NS_PER_S).astype(np.int64)
        last = np.searchsorted(times, starts, side="right") - 1
        peak = np.maximum(peak, np.where(last >= 0, counts[np.clip(last, 0, None)], 0))
        specs.append({"title": f"requests in flight (sent, not ended): the most in each {width:g} s bin",
                      "xlabel": "s into the phase", "x": x, "series": [series_spec("in flight", "requests", peak,
                                                                                step=True)]})
    failed = sorted({r.status for r in records} - {"ok"})
    if failed:
        specs.append({"title": "failed requests per second, by status", "xlabel": "s into the phase", "x": x,
                      "series": [series_spec(s, "req/s", _binned([r.end_ns for r in records if r.status == s], t0,
                                                             width, bins, every=every), step=True) for s in failed]})
    return specs


def server_side(rows: Sequence[Row], t0: int) -> list[Spec]:
    """The endpoint's scraped series over the phase: requests running and waiting, KV cache, tokens/s."""
    x = json_values([(r.t_ns - t0) / NS_PER_S for r in rows])
    specs = [{"title": "server: requests running and waiting, KV cache usage", "xlabel": "s into the phase",
              "x": x, "series": [series_spec(name, "requests", [r.values.get(name, np.nan) for r in rows], step=True)
                                 for name in ("running", "waiting")]
              + [series_spec("KV cache", "%", [100 * r.values.get("kv_cache_usage", np.nan) for r in rows])]}]
    times, per_s = rates(rows, "generation_tokens_total")
    if times:
        specs.append({"title": "server: generated tokens per second (between scrapes)",
                      "xlabel": "s into the phase", "x": json_values((np.asarray(times) - t0) / NS_PER_S),
                      "series": [series_spec("generated", "tokens/s", per_s)]})
    return specs


def cdf_specs(by_phase: dict[str, list[RequestRecord]]) -> list[Spec]:
    """TTFT, ITL and E2E of ok requests as cumulative shares, each phase a curve on one log-spaced grid."""
    measures: dict[str, Callable[[RequestRecord], list[float]]] = {
                "TTFT": lambda r: [v] if (v := ttft_ns(r)) is not None else [],
                "ITL": lambda r: itl_array_ns(r).tolist(),
                "E2E": lambda r: [v] if (v := e2e_ns(r)) is not None else []}
    specs = []
    for label, of in measures.items():
        values = {name: np.sort(np.asarray([v for r in recs if r.status == "ok" for v in of(r)],
                                           dtype=np.float64)) / NS_PER_MS for name, recs in by_phase.items()}
        present = [v for v in values.values() if len(v) and v[-1] > 0]
        if not present:
            continue
        # A few gaps of a few µs (tokens read together) would stretch the axis over six decades: they are
        # counted in the shares from the floor up, not drawn.
        lo = max(min(float(v[v > 0][0]) for v in present), AXIS_FLOOR_MS)
        hi = max(max(float(v[-1]) for v in present), lo * 1.01)
        grid = np.geomspace(lo, hi, 200)
        under = sum(int(np.searchsorted(v, AXIS_FLOOR_MS)) for v in values.values())
        floor = f" ({under:,} under {AXIS_FLOOR_MS:g} ms counted at the axis' start)" if under else ""
        specs.append({"title": f"{label}: share of requests at or below{floor}", "xlabel": f"{label} (ms)",
                      "xlog": True,
                      "x": json_values(grid, 4), "series": [
                          series_spec(name, "share", np.searchsorted(v, grid, side="right") / len(v), line=True)
                          for name, v in values.items() if len(v)]})
    return specs


def workload_specs(by_phase: dict[str, list[RequestRecord]]) -> list[Spec]:
    """The lengths the run sent and got back: prompt tokens (the server's count where it gave one) and output
    tokens received, per phase, in bins shared by the phases."""
    lengths = {name: ([r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested for r in recs],
                      [r.delivered_tokens for r in recs if r.status == "ok"]) for name, recs in by_phase.items()}
    specs = []
    for k, title in enumerate(("prompt tokens (counted by the server where it said)",
                               "output tokens received (ok requests)")):
        every = [v for pair in lengths.values() for v in pair[k]]
        if not every:
            continue
        lo, hi = min(every), max(every)
        # A fixed length is one narrow bar, not a spread of bins that all read the same.
        edges = np.linspace(lo * 0.9, hi * 1.1 + 1, 22) if lo == hi else np.histogram_bin_edges(
            every, bins=min(40, len(set(every))))
        specs.append({"title": title, "xlabel": "tokens", "x": json_values((edges[:-1] + edges[1:]) / 2, 1),
                      "series": [series_spec(name, "requests", np.histogram(pair[k], edges)[0], step=True)
                                 for name, pair in lengths.items()]})
    return specs


def sweep_specs(name: str, points: list[PhaseSummary], slo: SLO, knee: PhaseSummary | None) -> list[Spec]:
    """TTFT and TPOT percentiles against the throughput each point of the sweep reached, with the SLO line."""
    order = sorted(points, key=lambda p: p.throughput.output_tokens_per_s)
    x = json_values([p.throughput.output_tokens_per_s for p in order], 1)
    at = f"; knee: {knee.name}" if knee else "; no point met the SLOs"
    specs = []
    for key, metric in SLO_LATENCIES:
        limit: float | None = getattr(slo, key)
        if metric not in CHARTED or (metric is Latency.TTFT_ANSWER and limit is None):
            continue
        series = [series_spec(f"{LATENCIES[metric].label} {q}", "ms", [getattr(getattr(p.latency_ms, metric), q)
                                                              for p in order], points=True,
                              line=True, log=True, dash=q == "p99") for q in ("p50", "p99")]
        if limit is not None:
            series.append(series_spec(f"SLO {limit:g} ms", "ms", [limit] * len(order), line=True, log=True,
                                      color="#d62728"))
        if knee is not None:  # the capacity, marked where it sits on the curve
            series.append({**series_spec(f"knee: {knee.name}", "ms", [getattr(p.latency_ms, metric).p99 if
                                         p.name == knee.name else None for p in order], points=True,
                                         log=True, color="#000"), "size": 10})
        specs.append({"title": f"sweep {name}: {LATENCIES[metric].label} against output tokens/s{at}",
                      "xlabel": "output tokens/s", "x": x, "series": series})
    return specs
