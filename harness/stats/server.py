"""The server's own view of a run, from its Prometheus `/metrics`: which series to read, and what they say.

Pure functions: exposition text in, values out; scraped rows and a time window in, a phase's server
summary out. Engines name the same quantity differently, so each series here lists the names it goes by.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from harness.clock import NS_PER_S
from harness.doors import bounded_lines
from harness.limits import SCRAPE_LINE_CHARS

FILENAME = "server_metrics.csv"  # in the run directory, appended as scraped

# Our name -> the sample names it has in vLLM, SGLang, TGI and llama.cpp's llama-server (`--metrics`).
# Counters carry their `_total` suffix.
SERIES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
                "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size", "llamacpp:requests_deferred"),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                       "llamacpp:kv_cache_usage_ratio"),
    "generation_tokens_total": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                                "llamacpp:tokens_predicted_total"),
    "prompt_tokens_total": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "preemptions_total": ("vllm:num_preemptions_total",),
    # Prompt tokens looked up in / found in the prefix cache; llama.cpp counts only the ones it found.
    "prefix_cache_queries_total": ("vllm:prefix_cache_queries_total",),
    "prefix_cache_hits_total": ("vllm:prefix_cache_hits_total", "llamacpp:prompt_tokens_cached_total"),
    "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),  # SGLang's own running share, a gauge
    # The bundled simulator's account of its device (harness.stats.stress); no engine exports these.
    "memory_bound_seconds_total": ("sim:memory_bound_seconds_total",),
    "compute_bound_seconds_total": ("sim:compute_bound_seconds_total",),
    "hbm_read_bytes_total": ("sim:hbm_read_bytes_total",),
    "flops_total": ("sim:flops_total",),
    "peak_hbm_bytes_per_second": ("sim:peak_hbm_bytes_per_second",),
    "peak_flops_per_second": ("sim:peak_flops_per_second",),
}
COLUMNS: tuple[str, ...] = tuple(SERIES)
KNOWN: dict[str, str] = {name: ours for ours, names in SERIES.items() for name in names}
# Shares are averaged over the engines behind one endpoint; everything else adds up.
_AVERAGED = frozenset({"kv_cache_usage", "prefix_cache_hit_rate"})


def series_names(user: Mapping[Any, str] | None = None) -> dict[str, str]:
    """Sample name -> our series: the known names, with a scenario's own mapping (`endpoint.server_metrics`,
    our name -> its metric) for an engine nobody mapped, or to override one."""
    if not user:
        return KNOWN
    overridden = set(user)
    names = {name: ours for name, ours in KNOWN.items() if ours not in overridden}
    return names | {metric: ours for ours, metric in user.items()}

Sample = dict[str, float]


@dataclass(frozen=True, slots=True)
class Row:
    """One scrape: when its answer arrived (the harness clock) and the series it held."""

    t_ns: int
    values: Sample


def metrics_url(base_url: str) -> str:
    """vLLM, SGLang and TGI serve `/metrics` at the root, beside the `/v1` API."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc) == (pb.scheme, pb.netloc)


def parse_exposition(text: str, names: Mapping[str, str] = KNOWN) -> Sample:
    """The series of `names` in a Prometheus text exposition, summed (or averaged) over their label sets.

    Only the lines of known series reach the parser: a vLLM exposition is mostly histogram buckets,
    and the scrape shares the event loop with the load.
    """
    wanted = [line for line in text.splitlines()
              if line and line[0] != "#" and line.partition("{")[0].partition(" ")[0] in names]
    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families("\n".join(wanted) + "\n"):
        for sample in family.samples:
            ours = names.get(sample.name)
            if ours is not None and math.isfinite(sample.value):  # a NaN gauge would be a NaN figure: exit 4
                totals.setdefault(ours, []).append(float(sample.value))
    return {k: (sum(v) / len(v) if k in _AVERAGED else sum(v)) for k, v in totals.items()}


def counter_rate(rows: Sequence[Row], name: str, start_ns: int, end_ns: int) -> float | None:
    """The counter's rise over [start, end] per second, reading it between scrapes by linear interpolation,
    so the server's rate covers the same window as the client's (not just the scrapes that fell inside)."""
    points = [(r.t_ns, r.values[name]) for r in rows if name in r.values]
    if len(points) < 2 or end_ns <= start_ns:
        return None
    t = np.array([p[0] for p in points], dtype=np.float64)
    v = np.array([p[1] for p in points], dtype=np.float64)
    rise = float(np.interp(end_ns, t, v) - np.interp(start_ns, t, v))
    return rise / ((end_ns - start_ns) / NS_PER_S)


def gauge(rows: Sequence[Row], name: str) -> tuple[float | None, float | None]:
    values = [r.values[name] for r in rows if name in r.values]
    return (sum(values) / len(values), max(values)) if values else (None, None)


def phase_server_summary(rows: Sequence[Row], start_ns: int, end_ns: int) -> dict[str, float | int | None]:
    """Gauges averaged and maxed over the scrapes inside [start, end]; counters as rates over the window."""
    inside = [r for r in rows if start_ns <= r.t_ns <= end_ns]
    running_mean, running_max = gauge(inside, "running")
    waiting_mean, waiting_max = gauge(inside, "waiting")
    kv_mean, kv_max = gauge(inside, "kv_cache_usage")
    return {
        "scrapes": len(inside),
        "running_mean": running_mean, "running_max": running_max,
        "waiting_mean": waiting_mean, "waiting_max": waiting_max,
        "kv_cache_usage_mean": kv_mean, "kv_cache_usage_max": kv_max,
        "generation_tokens_per_s": counter_rate(rows, "generation_tokens_total", start_ns, end_ns),
        "prompt_tokens_per_s": counter_rate(rows, "prompt_tokens_total", start_ns, end_ns),
        "preemptions_per_s": counter_rate(rows, "preemptions_total", start_ns, end_ns),
        "prefix_cache_hit_share": _hit_share(rows, inside, start_ns, end_ns),
    }


def _hit_share(rows: Sequence[Row], inside: Sequence[Row], start_ns: int, end_ns: int) -> float | None:
    """The share of prompt tokens the server found in its prefix cache over the window: hits over lookups
    (vLLM), hits over hits plus tokens computed (llama.cpp counts only those two), or SGLang's own gauge."""
    hits = counter_rate(rows, "prefix_cache_hits_total", start_ns, end_ns)
    looked_up = counter_rate(rows, "prefix_cache_queries_total", start_ns, end_ns)
    if hits is not None and looked_up is None:
        computed = counter_rate(rows, "prompt_tokens_total", start_ns, end_ns)
        looked_up = None if computed is None else hits + computed
    if hits is not None and looked_up:
        return hits / looked_up
    return gauge(inside, "prefix_cache_hit_rate")[0]


def rates(rows: Sequence[Row], name: str) -> tuple[list[float], list[float]]:
    """A counter as a rate between consecutive scrapes: (midpoint times in ns, per-second values)."""
    points = [(r.t_ns, r.values[name]) for r in rows if name in r.values]
    times, values = [], []
    for (t0, v0), (t1, v1) in pairwise(points):
        if t1 > t0:
            times.append((t0 + t1) / 2)
            values.append((v1 - v0) / ((t1 - t0) / NS_PER_S))
    return times, values


def read_server_metrics(run_dir: Path) -> list[Row]:
    """The rows a run scraped, or none when it scraped nothing."""
    path = run_dir / FILENAME
    if not path.is_file():
        return []
    rows: list[Row] = []
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.DictReader(bounded_lines(f, SCRAPE_LINE_CHARS))
        while True:
            try:
                row = _row(next(reader))
            except StopIteration:
                return rows
            except csv.Error:  # a NUL, a field past csv's own limit: the line is left out
                continue
            if row is not None:
                rows.append(row)


def _row(line: dict[str, str]) -> Row | None:
    """A scraped row; None for one that does not read (the run killed mid-line, the file edited): the server's
    series stand beside the figures and are never a reason to lose them (a bad cell was a traceback in
    report)."""
    try:
        t_ns = int(line["t_ns"])
        values = {c: float(line[c]) for c in COLUMNS if line.get(c)}
    except (KeyError, ValueError, TypeError, OverflowError):
        return None
    return Row(t_ns, {c: v for c, v in values.items() if math.isfinite(v)})
