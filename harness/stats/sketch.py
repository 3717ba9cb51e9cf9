"""A metric's values as the statistics collect them: every value (exact percentiles), or — once a phase holds
more records than a run keeps in memory — a log-bucketed histogram whose memory does not grow with the run.

The histogram is HdrHistogram's idea with relative buckets: a value lands in the bucket [γ^i, γ^(i+1)) of its
magnitude, γ = 1.002, so any percentile is reported within 0.1% of the exact one (of the value the exact
percentile's interpolation lands on). Count, mean, standard deviation, min and max stay exact (Chan et al.'s
pairwise update of mean and squared deviations). Pure: numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.stats.metrics import PERCENTILES, distribution
from harness.stats.schema import Distribution

GAMMA = 1.002
RELATIVE_ERROR = (GAMMA - 1) / 2  # a bucket's midpoint is within this share of any value in it
_LOG_GAMMA = math.log(GAMMA)
_BUCKETS = int(math.log(2.0**63) / _LOG_GAMMA) + 2  # every nanosecond count an int64 holds
_BATCH = 4096  # values counted into buckets at once: one pass over the buckets per batch, not per value


class Samples:
    """The values of one metric (nanoseconds), exact until `to_histogram`, bounded after it."""

    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self._scalars: list[float] = []
        self._buffered = 0
        self._hist: _Histogram | None = None

    @property
    def exact(self) -> bool:
        return self._hist is None

    @property
    def count(self) -> int:
        return (self._hist.n if self._hist is not None else 0) + len(self._scalars) + self._buffered

    def add(self, value: float) -> None:
        self._scalars.append(value)
        if self._hist is not None and len(self._scalars) >= _BATCH:
            self._flush()

    def extend(self, values: np.ndarray) -> None:
        if values.size:
            self._parts.append(values)
            self._buffered += values.size
            if self._hist is not None and self._buffered >= _BATCH:
                self._flush()

    def to_histogram(self) -> None:
        """From here on the values are counted in buckets (a few thousand at a time), and the ones held so far
        are let go."""
        if self._hist is None:
            self._hist = _Histogram()
            self._flush()

    def exact_values(self) -> np.ndarray | None:
        """Every value, while they are all held (None once counted in buckets)."""
        return self._values() if self._hist is None else None

    def distribution(self) -> Distribution:
        if self._hist is None:
            return distribution(self._values())
        self._flush()
        return self._hist.distribution()

    def _flush(self) -> None:
        assert self._hist is not None
        self._hist.add(self._values())
        self._parts, self._scalars, self._buffered = [], [], 0

    def _values(self) -> np.ndarray:
        parts = [np.asarray(self._scalars, dtype=np.float64), *self._parts]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


class _Histogram:
    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.lo = math.inf
        self.hi = -math.inf
        self.positive = np.zeros(_BUCKETS, dtype=np.int64)
        self.negative: np.ndarray | None = None  # schedule lag can be a hair below zero on a shifted clock

    def add(self, values: np.ndarray) -> None:
        if values.size == 0:
            return
        n, mean = values.size, float(values.mean())
        m2 = float(((values - mean) ** 2).sum())
        total = self.n + n
        delta = mean - self.mean
        self.m2 += m2 + delta * delta * self.n * n / total
        self.mean += delta * n / total
        self.n = total
        self.lo, self.hi = min(self.lo, float(values.min())), max(self.hi, float(values.max()))
        below = values < 0
        self.positive += np.bincount(_bucket(values[~below]), minlength=_BUCKETS)
        if below.any():
            if self.negative is None:
                self.negative = np.zeros(_BUCKETS, dtype=np.int64)
            self.negative += np.bincount(_bucket(-values[below]), minlength=_BUCKETS)

    def distribution(self) -> Distribution:
        if self.n == 0:
            return distribution([])
        pct = [self._percentile(q) for _, q in PERCENTILES]
        return Distribution.model_validate({
            "count": self.n, "mean": self.mean / 1e6, "std": math.sqrt(self.m2 / self.n) / 1e6,
            "min": self.lo / 1e6, **{name: v / 1e6 for (name, _), v in zip(PERCENTILES, pct, strict=True)},
            "max": self.hi / 1e6,
        })

    def _percentile(self, q: float) -> float:
        """numpy's default (linear between the two order statistics around rank (n − 1)·q), bucket
        midpoints."""
        rank = (self.n - 1) * q / 100
        below, above = math.floor(rank), math.ceil(rank)
        a, b = self._order_statistic(below), self._order_statistic(above)
        return a + (rank - below) * (b - a)

    def _order_statistic(self, k: int) -> float:
        neg = self.negative[::-1] if self.negative is not None else np.zeros(0, dtype=np.int64)
        counts = np.concatenate([neg, self.positive])
        i = int(np.searchsorted(np.cumsum(counts), k + 1))
        value = -_midpoint(_BUCKETS - 1 - i) if i < neg.size else _midpoint(i - neg.size)
        return min(max(value, self.lo), self.hi)


def _bucket(magnitudes: np.ndarray) -> np.ndarray:
    """Bucket i holds [γ^i, γ^(i+1)) ns; everything under a nanosecond is bucket 0."""
    out: np.ndarray = (np.log(np.maximum(magnitudes, 1.0)) / _LOG_GAMMA).astype(np.int64)
    return out


def _midpoint(i: int) -> float:
    return float(GAMMA ** (i + 0.5)) if i > 0 else 1.0


def histogram_of(values: Sequence[float]) -> Distribution:
    """The distribution a histogram reports for `values` (for tests and benchmarks of its error)."""
    s = Samples()
    s.to_histogram()
    s.extend(np.asarray(values, dtype=np.float64))
    return s.distribution()
