import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.clock import NS_PER_S
from harness.workload.arrivals import (
    constant_offsets,
    gamma_offsets,
    poisson_offsets,
    ramp_offsets,
    trace_offsets,
    truncate_to_duration,
)


def _gaps_s(offsets: np.ndarray) -> np.ndarray:
    return np.diff(offsets) / NS_PER_S


@pytest.mark.parametrize("rate", [1.0, 10.0, 400.0])
def test_poisson_mean_gap_and_cv(rate: float) -> None:
    gaps = _gaps_s(poisson_offsets(rate, 20_000, seed=7))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)


def test_poisson_gaps_are_exponential() -> None:
    # Kolmogorov-Smirnov distance to the exponential CDF, computed by hand.
    gaps = np.sort(_gaps_s(poisson_offsets(50.0, 10_000, seed=3)))
    cdf = 1 - np.exp(-50.0 * gaps)
    n = len(gaps)
    ks = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    assert ks < 0.02


def test_constant_has_zero_cv_and_exact_gaps() -> None:
    offsets = constant_offsets(400.0, 1000)
    gaps = _gaps_s(offsets)
    assert gaps.std() / gaps.mean() < 1e-6
    assert offsets[-1] == round(999 * NS_PER_S / 400)  # from the index: no drift


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_burstiness(cv: float) -> None:
    gaps = _gaps_s(gamma_offsets(20.0, cv, 50_000, seed=11))
    assert gaps.mean() == pytest.approx(1 / 20.0, rel=0.04)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.06)


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    a, b, c = poisson_offsets(5, 100, 1), poisson_offsets(5, 100, 1), poisson_offsets(5, 100, 2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0.01, 5000), count=st.integers(1, 500), seed=st.integers(0, 2**32 - 1))
def test_offsets_start_at_zero_and_never_go_back(rate: float, count: int, seed: int) -> None:
    for offsets in (poisson_offsets(rate, count, seed), constant_offsets(rate, count),
                    gamma_offsets(rate, 1.7, count, seed)):
        assert len(offsets) == count
        assert offsets[0] == 0
        assert np.all(np.diff(offsets) >= 0)


def test_truncate_keeps_arrivals_before_duration() -> None:
    offsets = constant_offsets(10.0, 100)  # one every 100 ms
    assert len(truncate_to_duration(offsets, 2.0)) == 20
    assert len(truncate_to_duration(offsets, None)) == 100


@pytest.mark.parametrize(("a", "b"), [(10.0, 100.0), (100.0, 10.0), (40.0, 40.0)])
def test_poisson_ramp_follows_the_linear_rate(a: float, b: float) -> None:
    duration = 60.0
    counts = []
    for seed in range(5):
        t = ramp_offsets(a, b, duration, seed) / NS_PER_S
        counts.append(np.histogram(t, bins=6, range=(0, duration))[0])
    per_bin = np.mean(counts, axis=0)
    centres = (np.arange(6) + 0.5) * duration / 6
    expected = (a + (b - a) * centres / duration) * duration / 6
    assert per_bin == pytest.approx(expected, rel=0.08)


def test_constant_ramp_is_evenly_paced_at_its_instantaneous_rate() -> None:
    t = ramp_offsets(10.0, 30.0, 10.0, None) / NS_PER_S
    assert len(t) == 200  # ∫ rate dt = 10·10 + 20·10/2
    gaps = np.diff(t)
    assert gaps[0] == pytest.approx(1 / 10, rel=0.05)
    assert gaps[-1] == pytest.approx(1 / 30, rel=0.05)
    assert np.all(np.diff(gaps) <= 1e-12)  # the rate only rises: gaps only shrink


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.5, 500), b=st.floats(0.5, 500), duration=st.floats(0.5, 30), seed=st.integers(0, 1000))
def test_ramp_offsets_are_sorted_and_inside_the_duration(a: float, b: float, duration: float, seed: int) -> None:
    for s in (seed, None):
        t = ramp_offsets(a, b, duration, s)
        assert np.all(np.diff(t) >= 0)
        assert len(t) == 0 or (t[0] >= 0 and t[-1] < duration * NS_PER_S)


def test_trace_replays_timestamps_exactly_scaled() -> None:
    stamps = [100.0, 100.5, 100.25, 103.0]
    assert list(trace_offsets(stamps)) == [0, 250_000_000, 500_000_000, 3_000_000_000]
    assert list(trace_offsets(stamps, time_scale=10)) == [0, 25_000_000, 50_000_000, 300_000_000]
