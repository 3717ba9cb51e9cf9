"""The run-to-run noise a history shows, per phase and metric, and what it takes for a change to count.

Within one run, requests share the machine's state: a slow afternoon shifts every block of a run together, so
an interval built from the blocks of one run is narrow around a shifted value and says nothing of the next
run. The history of a scenario holds what does: the same metric over many runs in which nothing changed. Its
spread (the standard deviation of one run's value, relative to their mean; absolute for a share) is the noise
any single run carries, and a change between sides of `nb` and `nc` runs is then within `t·s·√(1/nb + 1/nc)`
of zero by noise alone (Student's t on the history's degrees of freedom). `harness compare` widens every
interval to at least that.

Two rules keep the many metrics of a night from raising alarms by chance:
- a percentile votes only with enough samples beyond it: `MIN_BEYOND` on each side (a p99 needs 1,000 samples,
  a p90 100), else its verdict is "inconclusive";
- a regression must hold after Holm's correction over every metric judged in the comparison (family-wise error
  5%): the metric's one-sided p-value of being worse than its tolerance, taken from its interval, must clear
  `ALPHA / (m − rank)`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 3  # fewer runs in the history say nothing of its spread
MIN_BEYOND = 10  # samples past a percentile before it may vote
ALPHA = 0.05  # the chance, over a whole comparison, of calling noise a regression
Z975 = 1.959964


@dataclass(frozen=True, slots=True)
class RunSpread:
    """One run's noise on a metric, as the history shows it."""

    sd: float  # of one run's value: relative to the runs' mean, or absolute for a share
    runs: int

    @property
    def df(self) -> int:
        return self.runs - 1


def spread(values: Sequence[float], absolute: bool) -> RunSpread | None:
    """The spread of one metric over the history's runs (None: fewer than MIN_RUNS, or a mean of zero)."""
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=np.float64)
    if len(v) < MIN_RUNS:
        return None
    if absolute:
        return RunSpread(float(v.std(ddof=1)), len(v))
    mean = float(v.mean())
    return RunSpread(float(v.std(ddof=1)) / mean, len(v)) if mean > 0 else None


def noise_half_width(s: RunSpread, base_runs: int, current_runs: int, t975: float) -> float:
    """Half the 95% interval a change between the sides' means has from run-to-run noise alone."""
    return t975 * s.sd * math.sqrt(1 / base_runs + 1 / current_runs)


def samples_needed(percentile: float) -> int | None:
    """Samples a side needs for its `percentile` (50, 99, …) to vote: MIN_BEYOND of them beyond it (None: no
    count is enough, as for the maximum)."""
    return math.ceil(MIN_BEYOND / (1 - percentile / 100) - 1e-9) if percentile < 100 else None


def worse_p(worse: float, low: float, high: float, tolerance: float) -> float:
    """One-sided p-value of the change being no worse than its tolerance, from its 95% interval (normal)."""
    se = (high - low) / (2 * Z975)
    if se <= 0:
        return 0.0 if worse > tolerance else 1.0
    return 0.5 * math.erfc((worse - tolerance) / se / math.sqrt(2))


def holm(p_values: Sequence[float], judged: int, alpha: float = ALPHA) -> list[bool]:
    """Which of `p_values` (the candidates among `judged` metrics) hold after Holm's step-down correction."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    keep = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / max(judged - rank, 1):
            break
        keep[i] = True
    return keep
