"""The rules that keep a night of many metrics quiet on A/A (issue 41): the history's run-to-run spread widens
every interval, a percentile votes only with enough samples beyond it, and Holm's correction runs over every
metric judged."""

from __future__ import annotations

import math

import pytest

from harness.stats.compare import MetricChange, PhaseChange, corrected, widened
from harness.stats.noise import RunSpread, holm, noise_half_width, samples_needed, spread, worse_p


def test_the_spread_of_one_run_relative_to_the_mean() -> None:
    s = spread([100.0, 110.0, 90.0, 100.0], absolute=False)
    assert s is not None and s.runs == 4 and s.df == 3
    assert s.sd == pytest.approx(math.sqrt(200 / 3) / 100)
    assert spread([0.01, 0.02, 0.03], absolute=True).sd == pytest.approx(0.01)  # type: ignore[union-attr]
    assert spread([100.0, 101.0], absolute=False) is None  # two runs say nothing of a spread


def test_a_percentile_needs_ten_samples_beyond_it() -> None:
    assert samples_needed(99) == 1000 and samples_needed(90) == 100 and samples_needed(50) == 20
    assert samples_needed(100) is None


def _change(name: str, point: float, low: float, high: float, tolerance: float, verdict: str) -> MetricChange:
    return MetricChange(name, 10.0, 10.0 * (1 + point), point, low, high, tolerance, verdict,  # type: ignore[arg-type]
                        "block bootstrap (20 vs 20 blocks)")


def test_a_narrow_interval_around_a_shifted_night_is_widened_to_the_historys_spread() -> None:
    # One run a side: the bootstrap sees +8% ± 2% on ITL p50; the history says one run alone moves by 4% (sd).
    narrow = _change("itl_p50", 0.08, 0.06, 0.10, 0.05, "regression")
    wide = widened(narrow, RunSpread(0.04, runs=10), 1, 1)
    half = noise_half_width(RunSpread(0.04, runs=10), 1, 1, 2.262)  # t(9 df)
    assert wide.low == pytest.approx(0.08 - half) and wide.high == pytest.approx(0.08 + half)
    assert wide.verdict == "within tolerance" and "history's spread over 10 runs" in wide.method
    # A real change far beyond that noise stays a regression; a spread narrower than the interval changes nothing.
    assert widened(_change("itl_p50", 0.30, 0.28, 0.32, 0.05, "regression"), RunSpread(0.04, 10), 1, 1).verdict \
        == "regression"
    assert widened(narrow, RunSpread(0.001, 10), 3, 3) == narrow


def test_holm_over_the_metrics_judged() -> None:
    assert holm([0.001, 0.04, 0.2], judged=18) == [True, False, False]
    assert holm([0.002, 0.0025], judged=2) == [True, True]
    assert worse_p(0.10, 0.06, 0.14, 0.05) == pytest.approx(0.5 * math.erfc(0.05 / (0.08 / 3.919928) / math.sqrt(2)))


def test_one_borderline_regression_among_eighteen_metrics_is_not_a_red_night() -> None:
    borderline = _change("ttft_p50", 0.13, 0.101, 0.16, 0.10, "regression")  # just clears its tolerance
    clear = _change("itl_p50", 0.30, 0.25, 0.35, 0.05, "regression")
    others = [PhaseChange("open", _change("e2e_p50", 0.0, -0.02, 0.02, 0.10, "within tolerance"))] * 16
    out = corrected([PhaseChange("open", borderline), PhaseChange("open", clear), *others])
    assert out[1].result.verdict == "regression"
    assert out[0].result.verdict == "inconclusive" and "Holm" in out[0].result.note


def test_untrusted_figures_beside_judged_ones_do_not_take_the_verdict_away() -> None:
    from harness.stats.compare import exit_code

    judged = PhaseChange("open", _change("itl_p50", 0.0, -0.01, 0.01, 0.05, "within tolerance"))
    untrusted = PhaseChange("open", _change("itl_p99", 0.08, 0.05, 0.11, 0.15, "untrusted"))
    worse = PhaseChange("open", _change("tpot_p50", 0.3, 0.25, 0.35, 0.05, "regression"))
    assert exit_code([judged, untrusted]) == 0  # two identical runs, one p99 the client may have moved: judged
    assert exit_code([untrusted]) == 5  # nothing judged at all
    assert exit_code([worse, untrusted]) == 99
