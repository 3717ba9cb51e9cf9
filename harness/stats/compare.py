"""Is CURRENT worse than BASELINE by more than noise and more than a tolerance? Pure maths over records.

Requests within one run are not independent: they share the server's state (its batch, its cache, its
queue), so neighbours in time move together and resampling single requests would make the interval too
narrow. Two ways to respect that:

- **Repeats** (three or more runs on each side): each run is one independent observation (fresh seeds, a
  fresh server where the bundled simulator is used); the interval is Welch's t interval on the difference of
  the runs' means, relative to the baseline's mean. Between-run spread carries every source of noise.
- **Otherwise**: a **block bootstrap**. Each run's measured requests are cut into blocks of consecutive time
  (a fixed batch is its own block); blocks are resampled with replacement on each side (1,000 times, seeded),
  the metric recomputed from the pooled requests of the drawn blocks, and the 2.5th–97.5th percentiles of the
  change are the interval. Correlation inside a block is kept; blocks far apart in time are nearly independent.

A change is a **regression** only when it is worse than its tolerance *and* the whole interval lies beyond
the tolerance: noise alone, or a real change smaller than the tolerance, never fails a job.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S
from harness.config.metric_registry import BlockCount, Latency, metric
from harness.errors import EXIT_NO_VERDICT, EXIT_REGRESSION
from harness.records import RequestRecord
from harness.stats.metrics import PER_RECORD, itl_array_ns
from harness.stats.noise import MIN_BEYOND, RunSpread, holm, noise_half_width, samples_needed, worse_p

Verdict = Literal["regression", "improvement", "within tolerance", "inconclusive", "no data", "untrusted"]
JUDGED = ("regression", "improvement", "within tolerance")  # verdicts that say something about the change
# The latencies a block keeps, in the order the history stores them (its blocks table's columns).
BLOCK_LATENCIES = (Latency.TTFT, Latency.TPOT, Latency.E2E, Latency.ITL, Latency.TTFT_ANSWER)
# The answer's TTFT is a figure of its own only where a model thought first; elsewhere it is TTFT again: a
# block of such a phase keeps no samples of it, and compare shows no row for it (compare_sides).
ONLY_WHEN_MEASURED = frozenset({Latency.TTFT_ANSWER})
RESAMPLES = 1000
REPEATS_FOR_RUN_LEVEL = 3
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


MIN_BLOCKS = 4  # fewer a side and the spread between blocks says nothing: the verdict is "inconclusive"


@dataclass(frozen=True, slots=True)
class Block:
    """A stretch of consecutive requests of one run: what the bootstrap draws."""

    latencies: dict[Latency, np.ndarray]  # ms: BLOCK_LATENCIES, per ok request (ITL: per sample)
    tokens: float
    seconds: float
    total: int
    failed: int

    @property
    def done(self) -> int:
        return self.total - self.failed

    def count(self, name: BlockCount) -> float:
        """One of the counts a ratio metric is drawn from (mypy checks every BlockCount is one)."""
        match name:
            case "failed":
                return float(self.failed)
            case "total":
                return float(self.total)
            case "tokens":
                return self.tokens
            case "done":
                return float(self.done)
            case "seconds":
                return self.seconds
            case _:
                assert_never(name)


def _block(records: Sequence[RequestRecord], seconds: float, thought: bool) -> Block:
    ok = [r for r in records if r.status == "ok"]
    kept = [k for k in BLOCK_LATENCIES if k is not Latency.ITL and (thought or k not in ONLY_WHEN_MEASURED)]
    latencies: dict[Latency, np.ndarray] = {k: np.zeros(0) for k in ONLY_WHEN_MEASURED} | {
        k: np.array([v for r in ok if (v := PER_RECORD[k](r)) is not None], dtype=np.float64) / NS_PER_MS
        for k in kept}
    latencies[Latency.ITL] = np.concatenate([itl_array_ns(r) for r in ok] or [np.zeros(0)]) / NS_PER_MS
    failed = sum(r.status not in ("ok", "cancelled") for r in records)
    return Block(latencies, float(sum(r.delivered_tokens for r in ok)), seconds, len(records), failed)


def _thought(records: Sequence[RequestRecord]) -> bool:
    """Whether a reasoning model thought first: some answer began after the first token."""
    return any(r.first_content_ns is not None and r.first_content_ns != r.first_token_ns for r in records)


def blocks(records: Sequence[RequestRecord], start_ns: int, end_ns: int) -> list[Block]:
    """The measured requests (intended inside [start, end]) in blocks: each fixed batch, or equal slices of
    time holding about 25 requests each (4 to 20 blocks)."""
    measured = sorted((r for r in records if start_ns <= r.intended_ns <= end_ns), key=lambda r: r.intended_ns)
    if not measured:
        return []
    thought = _thought(measured)
    batches: dict[int, list[RequestRecord]] = {}
    for r in measured:
        if r.batch is not None:
            batches.setdefault(r.batch, []).append(r)
    if batches:
        return [_block(b, (max(r.end_ns for r in b) - min(r.intended_ns for r in b)) / NS_PER_S, thought)
                for b in batches.values()]
    n = int(np.clip(len(measured) // 25, 4, 20))
    # Slice k holds the requests intended in the k-th n-th of the sending span (start to the last intended
    # send), so no slice is empty for want of sends while the last answers drain; the last slice's time runs
    # to the window's end, and an empty slice's time goes to the slice before it (the first's to the next), so
    # the blocks' seconds add up to the window and throughput from blocks equals the window's.
    sending = max(measured[-1].intended_ns - start_ns + 1, 1)
    at = np.minimum((np.array([r.intended_ns - start_ns for r in measured]) * n) // sending, n - 1)
    cuts = np.searchsorted(at, np.arange(n + 1)).tolist()
    held = [k for k in range(n) if cuts[k + 1] > cuts[k]]
    edges = [start_ns + k * sending // n for k in [0, *held[1:]]] + [max(end_ns, start_ns + sending)]
    return [_block(measured[cuts[k]:cuts[k + 1]], (edges[i + 1] - edges[i]) / NS_PER_S, thought)
            for i, k in enumerate(held)]


def _latency(name: str) -> tuple[Latency, float | None]:
    """A compared latency's distribution and percentile (None: the mean)."""
    entry = metric(name)
    assert entry.latency is not None and entry.statistic is not None, f"{name}: not a latency"
    return entry.latency, entry.quantile


def value(name: str, drawn: Sequence[Block]) -> float | None:
    """The metric over the pooled requests of `drawn` (None: no data)."""
    if (ratio := metric(name).ratio) is not None:
        over = sum(b.count(ratio[1]) for b in drawn)
        return sum(b.count(ratio[0]) for b in drawn) / over if over > 0 else None
    latency, q = _latency(name)
    pooled = np.concatenate([b.latencies[latency] for b in drawn] or [np.zeros(0)])
    if not len(pooled):
        return None
    return float(pooled.mean()) if q is None else float(np.percentile(pooled, q))


def change(name: str, base: float, current: float) -> float:
    """Relative change (current / base − 1), or the absolute difference for a share like error_rate."""
    if metric(name).absolute:
        return current - base
    return current / base - 1 if base else (0.0 if current == base else math.inf)


@dataclass(frozen=True, slots=True)
class MetricChange:
    metric: str
    baseline: float | None
    current: float | None
    change: float | None
    low: float | None  # the 95% interval of the change
    high: float | None
    tolerance: float
    verdict: Verdict
    method: str  # "block bootstrap (n blocks)" or "runs (n vs m)"
    note: str = ""  # why the verdict is what it is, where the figures do not say it (untrusted: who was late)


@dataclass(frozen=True, slots=True)
class PhaseChange:
    phase: str
    result: MetricChange


def judge(name: str, point: float, low: float, high: float, tolerance: float) -> Verdict:
    worse, better = (low, high) if not metric(name).higher_is_better else (-high, -low)
    if worse > tolerance:
        return "regression"
    if better < -tolerance:
        return "improvement"
    return "within tolerance"


def _multiplicities(rng: np.random.Generator, n: int) -> np.ndarray:
    """RESAMPLES × n: how often each block is drawn in each resample (n draws with replacement)."""
    draws = rng.integers(0, n, (RESAMPLES, n)) + n * np.arange(RESAMPLES)[:, None]
    return np.bincount(draws.ravel(), minlength=RESAMPLES * n).reshape(RESAMPLES, n).astype(np.float64)


def resampled(name: str, side: Sequence[Block], weights: np.ndarray) -> np.ndarray:
    """The metric in every resample at once (NaN where a resample has no data)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if (ratio := metric(name).ratio) is not None:
            over, under = ([b.count(c) for b in side] for c in ratio)
            return np.asarray(weights @ over / (weights @ under))
        latency, q = _latency(name)
        if q is None:
            return np.asarray(weights @ [float(b.latencies[latency].sum()) for b in side]
                              / (weights @ [len(b.latencies[latency]) for b in side]))
        return weighted_percentile([b.latencies[latency] for b in side], weights, q)


def _kth(parts: Sequence[np.ndarray], pooled: np.ndarray, weights: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row of `weights`, the k-th smallest (0-based) of the multiset holding each value of part j
    weights[row, j] times: a bisection over the pooled sorted values, counting with each part's own sort."""
    lo, hi = np.zeros(len(k), dtype=np.int64), np.full(len(k), len(pooled) - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        at = pooled[mid]
        below = sum(weights[:, j] * np.searchsorted(part, at, side="right") for j, part in enumerate(parts))
        enough = below >= k + 1
        hi, lo = np.where(enough, mid, hi), np.where(enough, lo, mid + 1)
    return pooled[lo]


def weighted_percentile(parts: Sequence[np.ndarray], weights: np.ndarray, q: float) -> np.ndarray:
    """The q-th percentile, for every row of `weights`, of the parts each repeated that row's (whole) number
    of times: exactly what np.percentile (linear) gives on the repeated values, without building them."""
    parts = [np.sort(p) for p in parts]
    pooled = np.sort(np.concatenate([*parts, np.zeros(0)]))
    size = weights @ np.array([len(p) for p in parts], dtype=np.float64)
    if not len(pooled):
        return np.full(len(weights), np.nan)
    h = np.maximum(size - 1, 0) * q / 100
    first = np.floor(h)
    below = _kth(parts, pooled, weights, first.astype(np.int64))
    above = _kth(parts, pooled, weights, np.minimum(first + 1, np.maximum(size - 1, 0)).astype(np.int64))
    return np.where(size > 0, below + (h - first) * (above - below), np.nan)


def bootstrap(name: str, base: Sequence[Block], current: Sequence[Block], tolerance: float,
              seed: int = 0) -> MetricChange:
    method = f"block bootstrap ({len(base)} vs {len(current)} blocks)"
    b0, c0 = value(name, base), value(name, current)
    if b0 is None or c0 is None:
        return MetricChange(name, b0, c0, None, None, None, tolerance, "no data", method)
    point = change(name, b0, c0)
    if min(len(base), len(current)) < MIN_BLOCKS:
        return MetricChange(name, b0, c0, point, None, None, tolerance, "inconclusive", method)
    rng = np.random.default_rng(seed)
    weights_b, weights_c = _multiplicities(rng, len(base)), _multiplicities(rng, len(current))
    with np.errstate(divide="ignore", invalid="ignore"):
        b, c = resampled(name, base, weights_b), resampled(name, current, weights_c)
        every = c - b if metric(name).absolute else c / b - 1
    draws = every[np.isfinite(every)]
    low, high = (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))) if len(draws) else (point, point)
    return MetricChange(name, b0, c0, point, low, high, tolerance, judge(name, point, low, high, tolerance), method)


def t975(df: float) -> float:
    """Student's t, 97.5th percentile, at the whole degrees of freedom below `df` (conservative)."""
    k = max(int(df), 1)
    return _T975[k - 1] if k <= len(_T975) else 2.0 if k <= 60 else 1.96


def across_runs(name: str, base: Sequence[float], current: Sequence[float], tolerance: float) -> MetricChange:
    """Welch's interval on the difference of the runs' means, relative to the baseline's mean."""
    method = f"runs ({len(base)} vs {len(current)})"
    b, c = np.asarray(base, dtype=np.float64), np.asarray(current, dtype=np.float64)
    mb, mc = float(b.mean()), float(c.mean())
    vb, vc = float(b.var(ddof=1)) / len(b), float(c.var(ddof=1)) / len(c)
    se = math.sqrt(vb + vc)
    df = (vb + vc) ** 2 / (vb ** 2 / (len(b) - 1) + vc ** 2 / (len(c) - 1)) if se > 0 else float(len(b) + len(c) - 2)
    half = t975(df) * se
    scale = 1.0 if metric(name).absolute else (mb or 1.0)
    point, low, high = (mc - mb) / scale, (mc - mb - half) / scale, (mc - mb + half) / scale
    return MetricChange(name, mb, mc, point, low, high, tolerance, judge(name, point, low, high, tolerance), method)


def exit_code(results: Sequence[PhaseChange]) -> int:
    """99 a regression; 5 nothing judged at all (every figure untrusted, inconclusive or without data); else
    0. Untrusted figures beside judged ones are shown and named, and the judged ones decide."""
    if any(p.result.verdict == "regression" for p in results):
        return EXIT_REGRESSION
    return 0 if any(p.result.verdict in JUDGED for p in results) else EXIT_NO_VERDICT


def too_few(name: str, base: Sequence[Sequence[Block]], current: Sequence[Sequence[Block]]) -> str | None:
    """Why a percentile cannot vote: a side's runs hold too few samples beyond it (None: enough, or not a
    percentile). Each run of a side counts on its own where the interval comes from runs, pooled otherwise."""
    entry = metric(name)
    if entry.latency is None:
        return None
    latency, q = _latency(name)
    if q is None or q <= 50:  # a mean or a median: every sample votes
        return None
    need = samples_needed(q)
    run_level = min(len(base), len(current)) >= REPEATS_FOR_RUN_LEVEL
    counts = [sum(len(b.latencies[latency]) for b in run) for side in (base, current) for run in side]
    if not run_level:
        counts = [sum(counts[:len(base)]), sum(counts[len(base):])]
    have = min(counts, default=0)
    if need is not None and have >= need:
        return None
    return (f"a {entry.statistic} of {have:,} samples (it needs {need:,} to have {MIN_BEYOND} beyond it) does "
            "not vote" if need is not None else f"a {entry.statistic} never votes")


def widened(result: MetricChange, spread: RunSpread, base_runs: int, current_runs: int) -> MetricChange:
    """The change's interval made at least as wide as run-to-run noise alone (the history's spread), and its
    verdict judged again on that interval."""
    assert result.change is not None and result.low is not None and result.high is not None
    half = noise_half_width(spread, base_runs, current_runs, t975(spread.df))
    point = result.change
    low, high = min(result.low, point - half), max(result.high, point + half)
    if (low, high) == (result.low, result.high):
        return result
    method = f"{result.method}, widened to the history's spread over {spread.runs} runs (±{half:.1%})"
    return dataclasses.replace(result, low=low, high=high, method=method,
                               verdict=judge(result.metric, point, low, high, result.tolerance))


def corrected(results: Sequence[PhaseChange]) -> list[PhaseChange]:
    """Holm's correction over every judged metric: a regression whose interval clears its tolerance but whose
    p-value does not clear Holm's step turns "inconclusive", with a note saying why."""
    judged = sum(p.result.verdict in JUDGED for p in results)
    candidates = [i for i, p in enumerate(results) if p.result.verdict == "regression"]
    ps = []
    for i in candidates:
        r = results[i].result
        assert r.change is not None and r.low is not None and r.high is not None
        sign = -1.0 if metric(r.metric).higher_is_better else 1.0
        worse, a, b = sign * r.change, sign * r.low, sign * r.high
        ps.append(worse_p(worse, min(a, b), max(a, b), r.tolerance))
    keep = holm(ps, judged)
    out = list(results)
    for i, held, p in zip(candidates, keep, ps, strict=True):
        if not held:
            note = (f"worse than its tolerance, but not beyond noise across the {judged} metrics judged "
                    f"(p = {p:.3f}; Holm's step asks less)")
            out[i] = PhaseChange(out[i].phase, dataclasses.replace(out[i].result, verdict="inconclusive", note=note))
    return out
