"""How far the harness's own lateness could have moved each figure it reports, figure by figure.

A token stamped while the event loop was busy elsewhere is stamped late by that loop's lag; a request sent
late (beyond any hold an in-flight cap puts on it by design) carries that lateness into every figure measured
from its intended send. How much that moves a figure depends on the figure as much as on the lag: 5 ms of lag
is nothing on an 800 ms TTFT and a lot on an 8 ms inter-token gap, and a lag that strikes 1% of the time moves
a p99, not a median.

The estimate (pure; numpy only) pairs the largest lags with the largest latencies: the q-th percentile of a
latency could have moved by the q-th percentile of the lag it takes (comonotone sums add their quantiles; the
mean, by the lag's mean). What each figure takes:

- TTFT and E2E: the stamp of their last instant, late by an event-loop lag `L`;
- ITL: a gap is measured from one read's stamp to the next, each late by a wake-up's lag, so it is off by the
  later lag less the earlier. Gaps are many and the server's gaps do not know when the harness's loop is late,
  so each gap takes independent draws of the two lags: the q-th percentile moves by as much as the q-th
  percentile of gap + `L₁ − L₂` differs from the gap's. A stall lands its gap in the tail and moves the p99 by
  about its length, as pairing would say; the sub-millisecond wake-ups of a shared machine, landing on ordinary
  gaps, move it by a fraction of their length (paired with the largest gaps they "moved" a 10 ms p99 by 5–6%
  where the simulator's ground truth saw 0.3–0.9%, `bench/client_shift.py --workers 2 --unpinned`). That holds
  while the lags are small beside the gaps (a lag p99 up to half the median gap): the measured gaps then stand in
  for the true ones. Lags as long as a gap make the measured tail themselves, and the pairing bound is kept. The
  mean gap of a request is its first and last stamps' span over its gaps, so it takes TPOT's rule;
- TPOT: its last token's `L`, spread over the request's tokens: `L/(tokens − 1)`;
- TTFT and E2E from the intended send: `L` plus the request's own sending lateness (schedule lag less any hold,
  less the timer's rounding as below: the sender sleeps to its deadlines on the same timers);
- the achieved rates: sent against intended, `|sent rate / offered rate − 1|`; and a saturated client (its core
  full) may have read more slowly than the server wrote, so its rates are flagged as such.

The event-loop lag is measured by a ticker sleeping 10 ms; its wake-up is rounded to the loop's timer
resolution (libuv counts in whole milliseconds), so up to `TIMER_RESOLUTION_MS` of every sample is that
rounding, not lateness, and is taken off. A figure whose estimated shift is over `share` (5% by default,
`client.max_shift`) of its value is flagged: the table marks its row, and `harness compare` and thresholds
treat only those figures as untrusted. The calibration against a server's ground truth: docs/load-engine.md
and bench/client_shift.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.config.metric_registry import COMPARED_STATISTICS, GOODPUT, RATES, SLO_LATENCIES, Latency, metric, of

# The event-loop lag kept per phase, as quantiles on this grid (percent): enough of its shape, tail included,
# to judge again offline (`harness report`, a merge) as the live run did.
LAG_GRID: tuple[float, ...] = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 98.0, 99.0, 99.5, 99.9, 100.0)
LAG_P99 = LAG_GRID.index(99.0)
TIMER_RESOLUTION_MS = 1.0
SHARE = 0.05
_STAMPED_ONCE = (Latency.TTFT, Latency.E2E, Latency.ITL)  # their stamps are late by the loop's wait
_FROM_INTENDED = (Latency.TTFT_FROM_INTENDED, Latency.E2E_FROM_INTENDED)  # … and by the send's lateness
# The latencies whose shift is judged, at the statistics `harness compare` judges (COMPARED_STATISTICS)
SHIFTED = (*_STAMPED_ONCE, Latency.TPOT, *_FROM_INTENDED)
# The latencies an SLO bounds, measured from the send or from the intended send: goodput moves with them.
_SLO_BOUND = (*(latency for _, latency in SLO_LATENCIES), *_FROM_INTENDED)


def wait_quantiles(lags_ms: Sequence[float] | np.ndarray, tick_ms: float) -> tuple[float, ...] | None:
    """How long an event arriving at a random instant waited for the event loop, as quantiles on LAG_GRID,
    from a ticker's lags (it slept `tick_ms` each time and woke that late); None: no tick.

    Weighted by time, not by tick: a 400 ms stall is one tick among hundreds but 400 ms of a few seconds, and
    every token that arrived in it waited (the one at its start the whole stall, the one at its end nothing):
    the share of time with a wait over w is Σ max(0, lag − w) / Σ (tick + lag). The timer's rounding is taken
    off each lag first: the loop was idle then, not late."""
    raw = np.asarray(lags_ms, dtype=np.float64)
    if not raw.size:
        return None
    lags = np.sort(np.maximum(raw - TIMER_RESOLUTION_MS, 0.0))
    total = float(np.sum(raw + tick_ms))
    # Share of time waiting longer than each sorted lag: Σ_{j>i} (lag_j − lag_i) / total, decreasing.
    after = np.cumsum(lags[::-1])[::-1]  # Σ_{j>=i} lag_j
    count = np.arange(len(lags), 0, -1)  # how many j >= i
    over = (after - count * lags) / total
    levels = 1.0 - np.asarray(LAG_GRID) / 100.0  # share of time over the quantile sought
    # Over falls from over[0] (at the smallest lag) to 0 (at the largest); below the smallest lag, linear to
    # it.
    points = np.concatenate([[0.0], lags])
    shares = np.concatenate([[float(np.sum(lags)) / total], over])
    waits = np.interp(levels, shares[::-1], points[::-1], left=float(lags[-1]), right=0.0)
    waits[0], waits[-1] = 0.0, float(lags[-1])
    return tuple(float(w) for w in waits)


def tick_quantiles(lags_ms: Sequence[float] | np.ndarray) -> tuple[float, ...] | None:
    """The lag per wake-up, as quantiles on LAG_GRID, less the timer's rounding (None: no tick)."""
    raw = np.asarray(lags_ms, dtype=np.float64)
    if not raw.size:
        return None
    return tuple(float(v) for v in np.percentile(np.maximum(raw - TIMER_RESOLUTION_MS, 0.0), LAG_GRID))


@dataclass(frozen=True, slots=True)
class Lateness:
    """What the harness's lateness over a phase looked like."""

    loop_ms: Sequence[float] | None  # the wait for the event loop, time-weighted, on LAG_GRID (None: not measured)
    tick_ms: Sequence[float] | None  # the lag per wake-up, on LAG_GRID (None: not measured)
    late_ms: np.ndarray  # per sent request: sent − intended − held, ms
    tokens_per_request: float = 1.0  # mean output tokens of an ok request (TPOT spreads its ends' lag over them)

    def loop_curve(self, per_event: bool = False) -> np.ndarray:
        """The wait for the event loop on LAG_GRID: what an event arriving at a random instant met (the larger
        of the time-weighted wait and the wake-up's lag), or with `per_event`, what one wake-up met (a gap: a
        stall inflates one gap a stream, the tokens read together after it none)."""
        assert self.loop_ms is not None
        ticks = np.asarray(self.tick_ms if self.tick_ms is not None else self.loop_ms, dtype=np.float64)
        return ticks if per_event else np.maximum(np.asarray(self.loop_ms, dtype=np.float64), ticks)

    def loop(self, q: float | None, per_event: bool = False) -> float:
        """`loop_curve` at its q-th percentile (None: its mean)."""
        lag = self.loop_curve(per_event)
        if q is None:  # the mean of the distribution the quantiles draw (linear between them)
            return float(np.sum((lag[1:] + lag[:-1]) / 2 * np.diff(LAG_GRID)) / 100.0)
        return float(np.interp(q, LAG_GRID, lag))

    def sending(self, q: float | None) -> float:
        """How late requests left at the q-th percentile (None: the mean), less the timer's rounding: the
        sender sleeps to each deadline on the same millisecond timers."""
        if not self.late_ms.size:
            return 0.0
        late = np.maximum(self.late_ms - TIMER_RESOLUTION_MS, 0.0)
        return float(late.mean() if q is None else np.percentile(late, q))


_SMALL_LAG = 0.5  # a wake-up lag p99 up to this share of the median gap: drawn independently (else paired)
_GAPS_KEPT = 1024  # an ITL sample's values, at most this many of its quantiles, for the independent draws
# A distribution given by its quantiles on LAG_GRID, as 201 equally likely draws: np.percentile of them gives
# back its own quantile at every multiple of 0.5 (p99 included).
_DRAWS = np.linspace(0.0, 100.0, 201)


def gap_errors_ms(lag_ms: Sequence[float] | np.ndarray) -> np.ndarray:
    """A gap's error, the later read's lag less the earlier's, each an independent draw of the wake-up lag
    whose quantiles on LAG_GRID are `lag_ms`: 201 equally likely draws of it."""
    lags = np.interp(_DRAWS, LAG_GRID, np.asarray(lag_ms, dtype=np.float64))
    return np.asarray(np.percentile((lags[:, None] - lags[None, :]).ravel(), _DRAWS))


def independent_shifts_ms(values: np.ndarray, errors_ms: np.ndarray, quantiles: Sequence[float]) -> list[float]:
    """How far each q-th percentile of `values` moves, either way, when each value takes an independent draw
    of `errors_ms` (equally likely draws): |q(values + error) − q(values)|, from every value (or `_GAPS_KEPT`
    of its quantiles)."""
    values = np.sort(np.asarray(values, dtype=np.float64))
    if values.size > _GAPS_KEPT:
        values = np.percentile(values, (np.arange(_GAPS_KEPT) + 0.5) / _GAPS_KEPT * 100)
    moved = np.percentile((values[:, None] + errors_ms[None, :]).ravel(), quantiles)
    return [abs(float(m - b)) for m, b in zip(moved, np.percentile(values, quantiles), strict=True)]


def shift_ms(name: str, q: float | None, lateness: Lateness) -> float:
    """How far the q-th percentile (None: the mean) of latency `name` could have moved, in ms, pairing the
    largest lags with the largest values (ITL's percentiles: `independent_shifts_ms`)."""
    loop = lateness.loop(q, per_event=name == Latency.ITL)
    if name == Latency.TPOT or (name == Latency.ITL and q is None):
        return loop / max(lateness.tokens_per_request - 1.0, 1.0)
    if name in _FROM_INTENDED:
        return loop + lateness.sending(q)
    return loop


def latency_shifts(values_ms: Mapping[str, np.ndarray], lateness: Lateness) -> dict[str, float]:
    """`<latency>_<statistic>` → the share by which the harness's lateness could have moved it (0.07: 7%)."""
    out: dict[str, float] = {}
    if lateness.loop_ms is None:
        return out
    for name, values in values_ms.items():
        values = np.asarray(values, dtype=np.float64)
        if not values.size or name not in SHIFTED:
            continue
        entries = [of(Latency(name), stat) for stat in COMPARED_STATISTICS]
        drawn = _drawn_gap_shifts(values, lateness, [e.quantile for e in entries if e.quantile is not None]) \
            if name == Latency.ITL else {}
        for entry in entries:
            q = entry.quantile
            base = float(values.mean() if q is None else np.percentile(values, q))
            if base > 0:
                out[entry.name] = (drawn[q] if q in drawn else shift_ms(name, q, lateness)) / base
    return out


def _drawn_gap_shifts(gaps: np.ndarray, lateness: Lateness, quantiles: list[float]) -> dict[float, float]:
    """ITL's percentiles moved by independently drawn wake-up lags, where the lags are small beside the gaps;
    nothing (the pairing bound) where they are not: lags a gap long make the measured tail themselves, and the
    measured gaps no longer stand in for the true ones."""
    wakeups = lateness.loop_curve(per_event=True)
    if wakeups[LAG_P99] > _SMALL_LAG * float(np.median(gaps)):
        return {}
    return dict(zip(quantiles, independent_shifts_ms(gaps, gap_errors_ms(wakeups), quantiles), strict=True))


def rate_shift(offered_rps: float | None, sent_rps: float | None) -> float | None:
    """How far the client's sending moved the achieved rate from the one its schedule asked for."""
    if not offered_rps or sent_rps is None:
        return None
    return abs(sent_rps / offered_rps - 1.0)


def flagged(shifts: Mapping[str, float], rate: float | None, saturated: bool, share: float = SHARE) -> list[str]:
    """The figures the client could have moved by more than `share`, in the registry's names, in order: the
    latencies over it, the rates when sending drifted or the client's core was full, goodput with any figure
    its SLOs are judged on."""
    out = [name for name, s in shifts.items() if s > share]
    if saturated or (rate is not None and rate > share):
        out += list(RATES)
    if any(metric(name).latency in _SLO_BOUND for name in out):
        out += list(GOODPUT)
    return list(dict.fromkeys(out))


