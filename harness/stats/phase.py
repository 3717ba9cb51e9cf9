"""Statistics over request records, with the definitions of the design brief (§3).

Pure functions: records in, plain dicts of numbers out. Latencies are reported in
milliseconds, rates per second; everything is exact from the records (no sketches).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.config.scenario import SLO
from harness.records import STATUSES, RequestRecord, Status
from harness.stats.metrics import (
    cause,
    distribution,
    duration_ns,
    e2e_from_intended_ns,
    e2e_ns,
    itl_samples_ns,
    meets_slo,
    schedule_lag_ns,
    tpot_ns,
    ttfc_ns,
    ttft_from_intended_ns,
    ttft_ns,
)
from harness.stats.schema import (
    Batches,
    ClientHealth,
    Connections,
    Goodput,
    Latencies,
    LatencyByStatus,
    Load,
    MeasuredWindow,
    PhaseLatencies,
    PhaseStats,
    Requests,
    StatusLatencies,
    Throughput,
    Tokens,
    WholeRun,
)
from harness.stats.schema import Window as SchemaWindow
from harness.stats.verdict import ClientCheck, health, lateness, verdict, worst

Metric = Callable[[RequestRecord], float | int | None]

# The three ways a request can end, for latencies split by status: an errored request's TTFT and
# duration say how long a user waited for the failure; a cancelled one was cut off by the run's stop.
STATUS_GROUPS: dict[str, tuple[Status, ...]] = {
    "ok": ("ok",),
    "errored": ("truncated", "overrun", "http_error", "timeout", "transport_error", "bad_stream"),
    "cancelled": ("cancelled",),
}




def _collect(records: Sequence[RequestRecord], metric: Metric) -> list[float]:
    out: list[float] = []
    for rec in records:
        value = metric(rec)
        if value is not None:
            out.append(float(value))
    return out


@dataclass(frozen=True, slots=True)
class Window:
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 1) / NS_PER_S

    def holds(self, t_ns: int | None) -> bool:
        return t_ns is not None and self.start_ns <= t_ns <= self.end_ns

    def to_json(self) -> dict[str, Any]:
        return {"start_ns": self.start_ns, "end_ns": self.end_ns, "duration_s": self.duration_s}


def windows(records: Sequence[RequestRecord], warmup_s: float, cooldown_s: float) -> tuple[Window, Window]:
    """The whole phase (first intended send to last end) and its measurement window inside it."""
    start = min((r.intended_ns for r in records), default=0)
    end = max((r.end_ns for r in records), default=start)
    whole = Window(start, end)
    m_start, m_end = start + int(warmup_s * NS_PER_S), end - int(cooldown_s * NS_PER_S)
    return whole, (Window(m_start, m_end) if m_end > m_start else whole)


def _throughput(ok: Sequence[RequestRecord], window: Window) -> Throughput:
    """Tokens and requests that arrived inside the window, per second of it.

    Output tokens are counted chunk by chunk, so a request straddling the window edge contributes
    only what it streamed inside; a request's prompt counts when its first token does.
    """
    out = 0.0
    inp = 0
    done = 0
    for r in ok:
        if r.chunk_ns:
            first, last = bisect_left(r.chunk_ns, window.start_ns), bisect_right(r.chunk_ns, window.end_ns)
            out += sum(r.chunk_tokens[first:last]) if r.exact_chunk_tokens else last - first
        if window.holds(r.first_token_ns):
            inp += _prompt(r)
        done += window.holds(r.end_ns)
    d = window.duration_s
    return Throughput(output_tokens_per_s=out / d, total_tokens_per_s=(out + inp) / d, requests_per_s=done / d)


def _prompt(r: RequestRecord) -> int:
    return r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested


class _Groups:
    """The records of a phase as the statistics slice them (in request order)."""

    def __init__(self, records: Sequence[RequestRecord], whole: Window, window: Window) -> None:
        self.records, self.whole, self.window = records, whole, window
        self.measured = [r for r in records if window.holds(r.intended_ns)]
        self.ok = [r for r in self.measured if r.status == "ok"]


def phase_stats(
    records: Sequence[RequestRecord], slo: SLO, lag_bound_ms: float = 5.0, *, warmup_s: float = 0.0,
    cooldown_s: float = 0.0, client: ClientCheck | None = None,
) -> PhaseStats:
    """Everything the reports need about one phase.

    Latencies are over the requests intended inside the measurement window (warm-up and
    cool-down excluded); rates are per second of that window; `whole_run` repeats the counts
    and rates over the whole phase.
    """
    # In request order, whatever order they finished in: float sums then come out the same to the last bit,
    # live and when `harness report` rebuilds them from disk.
    records = sorted(records, key=lambda r: r.index)
    g = _Groups(records, *windows(records, warmup_s, cooldown_s))
    measured, ok, d = g.measured, g.ok, g.window.duration_s
    sent = [r for r in measured if r.sent_ns is not None]
    ok_latencies = _latencies(ok)
    lag = distribution(_collect(sent, schedule_lag_ns))
    batches = batch_summary(records)
    good = sum(1 for r in ok if meets_slo(r, slo) and g.window.holds(r.end_ns))
    all_ok = [r for r in records if r.status == "ok"]
    return PhaseStats(
        requests=_requests(measured, len(ok)),
        window=MeasuredWindow(**g.window.to_json(), warmup_s=warmup_s, cooldown_s=cooldown_s),
        load=Load(offered_rps=span_rate([r.intended_ns for r in measured]),
                  sent_rps=span_rate([r.sent_ns for r in sent if r.sent_ns is not None]), completed_rps=len(ok) / d),
        latency_ms=PhaseLatencies(**dict(ok_latencies), schedule_lag=lag),
        latency_by_status_ms=_by_status(measured, ok_latencies),
        throughput=_throughput(ok, g.window),
        goodput=Goodput(requests_per_s=good / d, fraction=good / len(measured) if measured else 0.0, slo=slo),
        tokens=_tokens(ok),
        whole_run=WholeRun(window=SchemaWindow(**g.whole.to_json()), requests=len(records), ok=len(all_ok),
                           throughput=_throughput(all_ok, g.whole)),
        batches=batches,
        connections=_connections(measured),
        **_client_limited(lag.p99, lag_bound_ms, batches, client or ClientCheck()),
    )


SLOW_CONNECT_MS = 1000.0  # Linux's first SYN retransmission: a connect this slow lost a SYN


def _connections(measured: Sequence[RequestRecord]) -> Connections | None:
    times = [r.connect_ms for r in measured if r.connect_ms is not None]
    if not times:
        return None
    return Connections(opened=len(times), connect_ms=distribution([t * NS_PER_MS for t in times]),
                       slow=sum(1 for t in times if t >= SLOW_CONNECT_MS))


def span_rate(times_ns: Sequence[int]) -> float | None:
    """Events per second between the first and the last of them: (n − 1) / span, the rate estimate that does
    not count the time after the last event (a phase's draining) as sending time."""
    if len(times_ns) < 2:
        return None
    span = max(times_ns) - min(times_ns)
    return (len(times_ns) - 1) / (span / NS_PER_S) if span > 0 else None


def _requests(measured: Sequence[RequestRecord], ok: int) -> Requests:
    counts = Counter(r.status for r in measured)
    return Requests(total=len(measured), ok=ok, failed=len(measured) - ok,
                    by_status={s: counts.get(s, 0) for s in STATUSES},
                    failure_reasons=dict(Counter(cause(r) for r in measured if r.status != "ok")),
                    retried=sum(1 for r in measured if r.retries))


def _tokens(ok: Sequence[RequestRecord]) -> Tokens:
    return Tokens(output=sum(r.delivered_tokens for r in ok), input=sum(_prompt(r) for r in ok),
                  estimated=sum(1 for r in ok if r.tokens_estimated),
                  mismatched=sum(1 for r in ok if r.token_mismatch), **_prompt_realisation(ok))


def _latencies(records: Sequence[RequestRecord]) -> Latencies:
    itl: list[float] = []
    gaps: list[np.ndarray] = []
    for rec in records:
        itl.extend(itl_samples_ns(rec))
        if len(rec.chunk_ns) > 1:
            gaps.append(np.diff(np.asarray(rec.chunk_ns, dtype=np.float64)))
    return Latencies(
        ttft=distribution(_collect(records, ttft_ns)),
        ttft_from_intended=distribution(_collect(records, ttft_from_intended_ns)),
        time_to_first_content=distribution(_collect(records, ttfc_ns)),
        itl=distribution(itl),
        chunk_gap=distribution(np.concatenate(gaps) if gaps else []),
        tpot=distribution(_collect(records, tpot_ns)),
        e2e=distribution(_collect(records, e2e_ns)),
        e2e_from_intended=distribution(_collect(records, e2e_from_intended_ns)),
    )


def _by_status(measured: Sequence[RequestRecord], ok_latencies: Latencies) -> LatencyByStatus:
    """Latencies of ok, errored and cancelled requests apart, so failures do not hide in (or skew) the ok figures.
    The ok group's latencies are the phase's headline ones, computed once."""
    groups = {}
    for group, statuses in STATUS_GROUPS.items():
        recs = [r for r in measured if r.status in statuses]
        latencies = ok_latencies if group == "ok" else _latencies(recs)
        groups[group] = StatusLatencies(count=len(recs), output_tokens=sum(r.delivered_tokens for r in recs),
                                        duration=distribution(_collect(recs, duration_ns)), **dict(latencies))
    return LatencyByStatus(**groups)


def _prompt_realisation(ok: Sequence[RequestRecord]) -> dict[str, Any]:
    """How the server's count of each prompt compared with the length the harness asked for, and how much of
    it the server had cached."""
    diffs = [r.prompt_tokens - r.prompt_tokens_requested for r in ok if r.prompt_tokens is not None]
    cached = [r for r in ok if r.cached_tokens is not None]
    prompt = sum(_prompt(r) for r in cached)
    hit = sum(r.cached_tokens or 0 for r in cached)
    return {
        "prompt_reported": len(diffs),
        "prompt_mismatched": sum(1 for d in diffs if d != 0),
        "prompt_diff_mean": float(np.mean(diffs)) if diffs else None,
        "prompt_diff_max_abs": int(max(abs(d) for d in diffs)) if diffs else None,
        "cached_reported": len(cached), "prompt_cached": hit,
        "cached_share": hit / prompt if prompt else None,
    }


def _client_limited(lag_p99_ms: float | None, bound_ms: float, batches: Batches | None,
                    client: ClientCheck) -> dict[str, Any]:
    """Whether the client's own lateness or load could distort the phase, why, and whose fault it is.

    Late means: schedule lag p99 above its bound (open and closed loop; fixed batches are sent from one
    event loop, so their last request always leaves a little after the first, which only matters once it
    is a visible share of the batch: 2% of the median batch time), event-loop lag p99 above its bound, or
    the harness above its CPU bound. The live check's worst verdict inside the phase counts too, so a
    warning printed during the phase is never contradicted by the phase's verdict.
    """
    if batches is not None:
        bound_ms = max(bound_ms, 0.02 * float(batches.batch_time_ms.p50 or 0.0))
    schedule = (f"schedule lag p99 {float(lag_p99_ms):.1f} ms > {bound_ms:.1f} ms"
                if lag_p99_ms is not None and float(lag_p99_ms) > bound_ms else None)
    name, reason = worst(verdict(lateness(client, schedule), client), (client.live_verdict, client.live_reason))
    return {
        "client_limited": name != "ok", "client_limited_reason": reason or None,
        "schedule_lag_bound_ms": bound_ms,
        "client": ClientHealth(**health(client, name)),
    }


def batch_summary(records: Sequence[RequestRecord]) -> Batches | None:
    """Fixed-batch phases: time from a batch's send to its last completion, and its tokens/s."""
    by_batch: dict[int, list[RequestRecord]] = {}
    for rec in records:
        if rec.batch is not None:
            by_batch.setdefault(rec.batch, []).append(rec)
    if not by_batch:
        return None
    times, rates = [], []
    for recs in by_batch.values():
        elapsed = max(r.end_ns for r in recs) - min(r.intended_ns for r in recs)
        times.append(elapsed)
        tokens = sum(r.delivered_tokens for r in recs if r.status == "ok")
        rates.append(tokens / max(elapsed, 1) * NS_PER_S)
    return Batches(count=len(by_batch), batch_time_ms=distribution(times),
                   output_tokens_per_s_mean=float(np.mean(rates)))
