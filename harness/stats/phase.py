"""Statistics over a phase's request records, with the definitions of the design brief (§3).

Pure functions: records in, a `PhaseStats` out. Latencies are reported in milliseconds, rates per second;
exact from the records, unless the phase held more of them than the run keeps in memory
(`harness.stats.fold`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.config.scenario import SLO
from harness.records import STATUSES, RequestRecord
from harness.stats.distortion import LAG_P99, Lateness, flagged, latency_shifts, rate_shift
from harness.stats.fold import (
    EVERYTHING,
    SLOW_CONNECT_MS,
    STATUS_GROUP,
    Flow,
    Group,
    Interval,
    Prompts,
    Span,
    Turns,
)
from harness.stats.metrics import cause, client_late_ns, distribution, schedule_lag_ns, slo_misses
from harness.stats.schema import (
    Batches,
    ClientHealth,
    Connections,
    Goodput,
    LatencyByStatus,
    Load,
    MeasuredWindow,
    PhaseLatencies,
    PhaseStats,
    Requests,
    WholeRun,
)
from harness.stats.schema import Window as SchemaWindow
from harness.stats.sketch import Samples
from harness.stats.verdict import ClientCheck, health, lateness, verdict, worst

__all__ = ["Interval", "PhaseFold", "phase_stats", "span_rate"]


def windows_between(first_ns: int, last_ns: int, warmup_s: float, cooldown_s: float) -> tuple[Interval, Interval]:
    """The whole phase (first intended send to last end) and its measurement window inside it."""
    whole = Interval(first_ns, last_ns)
    m_start, m_end = first_ns + int(warmup_s * NS_PER_S), last_ns - int(cooldown_s * NS_PER_S)
    return whole, (Interval(m_start, m_end) if m_end > m_start else whole)



def span_rate(times_ns: Sequence[int]) -> float | None:
    """Events per second between the first and the last of them: (n − 1) / span, the rate estimate that does
    not count the time after the last event (a phase's draining) as sending time."""
    span = Span()
    for t in times_ns:
        span.add(t)
    return span.rate()


@dataclass
class PhaseFold:
    """Everything `PhaseStats` needs, gathered one record at a time (see `harness.stats.fold`)."""

    slo: SLO
    groups: dict[str, Group] = field(default_factory=lambda: {g: Group() for g in ("ok", "errored", "cancelled")})
    statuses: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    said: dict[str, str] = field(default_factory=dict)  # cause → the server's own sentence, the first it gave
    retried: int = 0
    measured: int = 0
    good: int = 0
    missed: Counter[str] = field(default_factory=Counter)  # ok requests over each SLO limit
    lag: Samples = field(default_factory=Samples)
    late: Samples = field(default_factory=Samples)  # the schedule lag that was the client's (less any cap's hold)
    connect: Samples = field(default_factory=Samples)
    slow_connects: int = 0
    intended: Span = field(default_factory=Span)
    sent: Span = field(default_factory=Span)
    unheld: Span = field(default_factory=Span)  # sends less any in-flight cap's hold: the client's own pace
    prompts: Prompts = field(default_factory=Prompts)
    flow: Flow = field(default_factory=Flow)
    whole_n: int = 0
    whole_ok: int = 0
    whole_flow: Flow = field(default_factory=Flow)
    batches: dict[int, list[int]] = field(default_factory=dict)  # batch → [first intended, last end, ok tokens]
    turns: Turns = field(default_factory=Turns)
    media: Counter[str] = field(default_factory=Counter)
    usage_over: int = 0  # ok answers whose usage counted more tokens than chunks arrived (one more is an end token)
    usage_example: tuple[int, int] = (0, 0)  # the widest such gap: (usage's tokens, chunks)

    def add(self, r: RequestRecord, window: tuple[int, int] = EVERYTHING) -> None:
        """One record; `window` the measurement window's edges, or EVERYTHING for a record known to be
        inside."""
        self._whole(r)
        if not window[0] <= r.intended_ns <= window[1]:
            return
        self.measured += 1
        self.statuses[r.status] += 1
        self.retried += bool(r.retries)
        self.groups[STATUS_GROUP.get(r.status, "errored")].add(r)
        self.intended.add(r.intended_ns)
        if r.sent_ns is not None:
            self.sent.add(r.sent_ns)
            self.unheld.add(r.sent_ns - r.held_ns)
            self.lag.add(float(schedule_lag_ns(r) or 0))
            self.late.add(float(client_late_ns(r) or 0))
        if r.connect_ms is not None:
            self.connect.add(r.connect_ms * NS_PER_MS)
            self.slow_connects += r.connect_ms >= SLOW_CONNECT_MS
        if r.status != "ok":
            why = cause(r)
            self.causes[why] += 1
            if r.message and why not in self.said:
                self.said[why] = r.message
            return
        self.prompts.add(r)
        self.flow.add(r, *window)
        if window[0] <= r.end_ns <= window[1]:
            missed = slo_misses(r, self.slo)
            self.good += not missed
            self.missed.update(missed)

    def _whole(self, r: RequestRecord) -> None:
        self.whole_n += 1
        if r.status == "ok":
            self.whole_ok += 1
            self.whole_flow.add(r, *EVERYTHING)  # every chunk lies between the first intended send and the last end
            chunks = len(r.chunk_ns)
            if (r.completion_tokens is not None and r.completion_tokens > chunks + 1 and not r.exact_chunk_tokens
                    and not r.answered_whole):  # an answer that came whole has no chunks to count
                self.usage_over += 1
                if r.completion_tokens - chunks > self.usage_example[0] - self.usage_example[1]:
                    self.usage_example = (r.completion_tokens, chunks)
        if r.batch is not None:
            b = self.batches.setdefault(r.batch, [r.intended_ns, r.end_ns, 0])
            b[0], b[1] = min(b[0], r.intended_ns), max(b[1], r.end_ns)
            b[2] += r.delivered_tokens if r.status == "ok" else 0
        if r.turn is not None:
            self.turns.add(r)
        if r.content_type is not None:
            self.media[r.content_type] += 1

    def to_histograms(self) -> None:
        """Every metric's values into its histogram: memory stops growing with the records."""
        samples = [self.lag, self.late, self.connect, *self.turns.ttft.values()]
        samples += [s for g in self.groups.values() for s in g.values.values()]
        for s in samples:
            s.to_histogram()

    @property
    def exact(self) -> bool:
        return self.lag.exact

    def stats(self, whole: Interval, window: Interval, lag_bound_ms: float, warmup_s: float, cooldown_s: float,
              client: ClientCheck) -> PhaseStats:
        d, ok = window.duration_s, self.groups["ok"]
        lag = self.lag.distribution()
        batches = self._batches()
        ok_latencies = ok.latencies()
        by_status = {g: (grp.with_status(ok_latencies) if g == "ok" else grp.with_status(grp.latencies()))
                     for g, grp in self.groups.items()}
        return PhaseStats(
            requests=Requests(total=self.measured, ok=ok.count, failed=self.measured - ok.count,
                              by_status={s: self.statuses.get(s, 0) for s in STATUSES},
                              failure_reasons=dict(self.causes), retried=self.retried,
                              failure_messages=dict(self.said)),
            window=MeasuredWindow(**window.to_json(), warmup_s=warmup_s, cooldown_s=cooldown_s),
            load=Load(offered_rps=self.intended.rate(), sent_rps=self.sent.rate(), completed_rps=ok.count / d),
            latency_ms=PhaseLatencies(**dict(ok_latencies), schedule_lag=lag),
            latency_by_status_ms=LatencyByStatus(**by_status),
            throughput=self.flow.per_second(window),
            goodput=Goodput(requests_per_s=self.good / d, fraction=self.good / self.measured if self.measured
                            else 0.0, slo=self.slo, missed=dict(self.missed)),
            tokens=self.prompts.tokens(),
            whole_run=WholeRun(window=SchemaWindow(**whole.to_json()), requests=self.whole_n, ok=self.whole_ok,
                               throughput=self.whole_flow.per_second(whole)),
            batches=batches,
            connections=Connections(opened=self.connect.count, connect_ms=self.connect.distribution(),
                                    slow=self.slow_connects) if self.connect.count else None,
            **self._client_limited(lag_bound_ms, batches, client),
        )

    def _client_limited(self, bound_ms: float, batches: Batches | None, client: ClientCheck) -> _ClientFields:
        """Figure by figure where the event-loop lag's shape is known (harness.stats.distortion); else the
        phase as a whole, against the lag bounds."""
        late = self.late.distribution()
        if client.loop_wait_quantiles_ms is None:
            return _client_limited(late.p99, bound_ms, batches, client)
        ok = self.groups["ok"]
        values = {name: v for name, samples in ok.values.items()
                  if name != "duration" and (v := samples.exact_values()) is not None}
        late_ms = self.late.exact_values()
        lateness = Lateness(client.loop_wait_quantiles_ms, client.loop_tick_quantiles_ms,
                            np.zeros(0) if late_ms is None else late_ms / NS_PER_MS,
                            ok.output_tokens / ok.count if ok.count else 1.0)
        moved = latency_shifts({k: v / NS_PER_MS for k, v in values.items()}, lateness)
        rate = None if batches is not None else rate_shift(self.intended.rate(), self.unheld.rate())
        saturated = (client.cpu_share or 0.0) >= client.cpu_bound
        return _judged(moved, rate, saturated, late.p99, bound_ms, client)

    def _batches(self) -> Batches | None:
        """Fixed-batch phases: time from a batch's send to its last completion, and its tokens/s."""
        if not self.batches:
            return None
        times = [end - start for start, end, _ in self.batches.values()]
        rates = [tokens / max(end - start, 1) * NS_PER_S for start, end, tokens in self.batches.values()]
        return Batches(count=len(self.batches), batch_time_ms=distribution(times),
                       output_tokens_per_s_mean=float(np.mean(rates)))


def phase_stats(
    records: Sequence[RequestRecord], slo: SLO, lag_bound_ms: float = 5.0, *, warmup_s: float = 0.0,
    cooldown_s: float = 0.0, client: ClientCheck | None = None,
) -> PhaseStats:
    """Everything the reports need about one phase, from all its records (see `fold_phase`)."""
    return fold_phase(records, slo, lag_bound_ms, warmup_s=warmup_s, cooldown_s=cooldown_s, client=client)[0]


def fold_phase(
    records: Sequence[RequestRecord], slo: SLO, lag_bound_ms: float = 5.0, *, warmup_s: float = 0.0,
    cooldown_s: float = 0.0, client: ClientCheck | None = None, fold: PhaseFold | None = None,
    span: tuple[int, int] | None = None,
) -> tuple[PhaseStats, PhaseFold]:
    """A phase's statistics, and the fold they came from (its sessions and media types).

    Latencies are over the requests intended inside the measurement window (warm-up and cool-down excluded);
    rates are per second of that window; `whole_run` repeats the counts and rates over the whole phase.
    `fold` and `span` (first intended send, last end) carry what a `PhaseKeep` already let go of.
    """
    # In request order, whatever order they finished in: float sums then come out the same to the last bit,
    # live and when `harness report` rebuilds them from disk.
    records = sorted(records, key=lambda r: r.index)
    first = min([r.intended_ns for r in records] + ([span[0]] if span else []), default=0)
    last = max([r.end_ns for r in records] + ([span[1]] if span else []), default=first)
    whole, window = windows_between(first, last, warmup_s, cooldown_s)
    fold = fold or PhaseFold(slo)
    for r in records:
        fold.add(r, (window.start_ns, window.end_ns))
    return fold.stats(whole, window, lag_bound_ms, warmup_s, cooldown_s, client or ClientCheck()), fold


class _ClientFields(TypedDict, total=False):
    client_limited: bool
    client_limited_reason: str | None
    client_limited_metrics: list[str]
    client_moved: dict[str, float]
    schedule_lag_bound_ms: float
    client: ClientHealth


def _judged(moved: dict[str, float], rate: float | None, saturated: bool, late_p99_ms: float | None,
            bound_ms: float, client: ClientCheck) -> _ClientFields:
    """The phase's figures the client could have moved by more than its share, and why it was late."""
    limited = flagged(moved, rate, saturated, client.max_shift)
    shown = {k: round(v, 4) for k, v in moved.items() if v >= 0.01}
    if rate is not None and rate >= 0.01:
        shown["sent_rate"] = round(rate, 4)
    if not limited:
        return {"client_limited": False, "client_limited_reason": None, "client_limited_metrics": [],
                "client_moved": shown, "schedule_lag_bound_ms": bound_ms, "client": health(client, "ok")}
    loop = client.loop_wait_quantiles_ms
    said = [f"waits for its event loop p99 {loop[LAG_P99]:.1f} ms" if loop else "",
            f"sending lateness p99 {late_p99_ms:.1f} ms" if late_p99_ms else ""]
    name, why = verdict("; ".join(w for w in said if w) or "late", client)
    worst_moved = sorted(((v, k) for k, v in moved.items() if k in limited), reverse=True)[:3]
    figures = ", ".join(f"{k} by ~{v:.0%}" for v, k in worst_moved)
    if rate is not None and rate > client.max_shift:
        figures = ", ".join(w for w in (figures, f"the sent rate by {rate:.0%}") if w)
    elif saturated:
        figures = ", ".join(w for w in (figures, "the rates (its core was full)") if w)
    reason = f"{why}; it could have moved {figures} (over {client.max_shift:.0%}: those figures are untrusted)"
    return {"client_limited": True, "client_limited_reason": reason, "client_limited_metrics": limited,
            "client_moved": shown, "schedule_lag_bound_ms": bound_ms,
            "client": health(client, "stalled" if name == "ok" else name)}


def _client_limited(lag_p99_ms: float | None, bound_ms: float, batches: Batches | None,
                    client: ClientCheck) -> _ClientFields:
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
        "client": health(client, name),
    }


