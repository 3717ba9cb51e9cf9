"""Arrival schedules: pure, seeded functions from a load description to intended send offsets.

An open-loop schedule is computed up front, so every request has its intended send time
before anything is sent; the dispatcher then sleeps to absolute deadlines.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from harness.clock import NS_PER_S

OffsetsNs = npt.NDArray[np.int64]


def poisson_offsets(rate: float, count: int, seed: int) -> OffsetsNs:
    """Offsets of a Poisson process: exponential gaps with mean 1/rate, the first at t=0."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=count)
    return _to_offsets_ns(gaps)


def gamma_offsets(rate: float, cv: float, count: int, seed: int) -> OffsetsNs:
    """Bursty arrivals: gamma gaps with mean 1/rate and coefficient of variation `cv`.

    Gamma with shape k has CV 1/sqrt(k), so k = 1/cv²; cv = 1 is Poisson, cv > 1 is burstier.
    """
    shape = 1.0 / (cv * cv)
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape, 1.0 / (rate * shape), size=count)
    return _to_offsets_ns(gaps)


def constant_offsets(rate: float, count: int) -> OffsetsNs:
    """Evenly spaced arrivals at `rate`; computed from the index, so there is no drift."""
    return np.round(np.arange(count) * (NS_PER_S / rate)).astype(np.int64)


def _to_offsets_ns(gaps_s: npt.NDArray[np.float64]) -> OffsetsNs:
    # The first request goes at t=0: a run should not open with an idle gap.
    offsets = np.concatenate(([0.0], np.cumsum(gaps_s[:-1]))) if len(gaps_s) else np.zeros(0)
    return np.round(offsets * NS_PER_S).astype(np.int64)


def truncate_to_duration(offsets: OffsetsNs, duration_s: float | None) -> OffsetsNs:
    """Keep the arrivals that fall before `duration_s` (all when it is None)."""
    if duration_s is None:
        return offsets
    return offsets[offsets < int(duration_s * NS_PER_S)]
