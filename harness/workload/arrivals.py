"""Arrival schedules: pure, seeded functions from a load description to intended send offsets.

An open-loop schedule is computed up front, so every request has its intended send time
before anything is sent; the dispatcher then sleeps to absolute deadlines.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def ramp_offsets(start_rate: float, end_rate: float, duration_s: float, seed: int | None) -> OffsetsNs:
    """Arrivals whose rate rises (or falls) linearly from `start_rate` to `end_rate` over `duration_s`.

    Time rescaling: with cumulative intensity Λ(t) = a·t + (b − a)·t²/(2T), the k-th arrival is at
    Λ⁻¹(S_k), where S_k are the arrival times of a unit-rate process: exponential sums for a Poisson
    ramp (`seed` given), the integers for an evenly paced one (`seed` None).
    """
    a, b, t_end = start_rate, end_rate, duration_s
    total = a * t_end + (b - a) * t_end / 2  # Λ(T): expected arrivals over the ramp
    if seed is None:
        s = np.arange(int(np.floor(total)) + 1, dtype=np.float64)
    else:
        rng = np.random.default_rng(seed)
        gaps = rng.exponential(1.0, size=int(total + 10 * np.sqrt(total + 1)) + 10)
        s = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
        s = s[s <= total]
    k = (b - a) / t_end  # slope of the rate
    if abs(k) < 1e-12:
        t = s / a
    else:  # solve a·t + k·t²/2 = s for the root in [0, T]
        t = (-a + np.sqrt(np.maximum(a * a + 2 * k * s, 0.0))) / k
    t = t[t < t_end]
    offsets: OffsetsNs = np.round(t * NS_PER_S).astype(np.int64)
    return offsets


def trace_offsets(timestamps_s: Sequence[float], time_scale: float = 1.0) -> OffsetsNs:
    """Offsets of recorded arrival times, first at 0; `time_scale` 10 replays ten times faster."""
    ts = np.sort(np.asarray(timestamps_s, dtype=np.float64))
    base = ts[0] if ts.size else 0.0
    offsets: OffsetsNs = np.round((ts - base) / time_scale * NS_PER_S).astype(np.int64)
    return offsets
