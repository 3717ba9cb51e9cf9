""""Client limited" figure by figure (issue 41): how far the harness's own lateness could have moved each figure,
judged against the figure, not against one lag bound for the whole phase."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.scenario import SLO
from harness.stats.distortion import (
    LAG_GRID,
    Lateness,
    flagged,
    gap_errors_ms,
    independent_shifts_ms,
    latency_shifts,
    wait_quantiles,
)
from harness.stats.phase import phase_stats
from harness.stats.schema import PhaseStats
from harness.stats.verdict import ClientCheck
from tests.helpers import rec


def _grid(**at: float) -> tuple[float, ...]:
    """Wait quantiles on LAG_GRID: 0 up to the first percent named, then the values given (p99=3.0 → 99%)."""
    points = {float(k[1:].replace("_", ".")): v for k, v in at.items()}
    out, level = [], 0.0
    for q in LAG_GRID:
        level = points.get(q, level)
        out.append(level)
    return tuple(out)


def test_a_stall_weighs_by_its_time_not_by_its_one_tick() -> None:
    # 100 ticks on time and one 400 ms stall, ticking every 10 ms: 1,410 ms in all, of which 399 ms (less the
    # timer's 1 ms rounding) someone arriving waited; waits over w for (399 − w) / 1410 of the time.
    waits = dict(zip(LAG_GRID, wait_quantiles([0.0] * 100 + [400.0], 10.0), strict=True))
    assert waits[50.0] == 0.0 and waits[100.0] == 399.0
    assert waits[90.0] == pytest.approx(399 - 0.10 * 1410)
    assert waits[99.0] == pytest.approx(399 - 0.01 * 1410)
    assert waits[75.0] == pytest.approx(399 - 0.25 * 1410)


def test_the_timers_millisecond_rounding_is_not_lateness() -> None:
    # A quiet loop: a 10 ms sleep wakes 0–1 ms late because libuv counts whole milliseconds.
    ticks = np.random.default_rng(1).uniform(0.0, 1.0, 3000)
    assert wait_quantiles(ticks, 10.0) == tuple([0.0] * len(LAG_GRID))


def test_each_figure_takes_the_lag_that_reaches_it() -> None:
    lateness = Lateness(_grid(p90=1.0, p99=4.0, p100=8.0), None, late_ms=np.array([0.0] * 98 + [20.0, 20.0]),
                        tokens_per_request=21.0)
    values = {"ttft": np.full(100, 40.0), "itl": np.full(2000, 10.0), "tpot": np.full(100, 10.0),
              "ttft_from_intended": np.full(100, 40.0)}
    moved = latency_shifts(values, lateness)
    assert moved["ttft_p50"] == 0.0 and moved["ttft_p90"] == pytest.approx(1.0 / 40)
    assert moved["ttft_p99"] == pytest.approx(4.0 / 40)  # the p99 wait on the p99 figure
    assert moved["itl_p99"] == pytest.approx(4.0 / 10)  # the same wait is a larger share of a short gap
    assert moved["tpot_p99"] == pytest.approx(4.0 / 20 / 10)  # spread over the request's 20 gaps
    # A request's mean gap is its first-to-last span over its gaps: TPOT's rule (both 10 ms here), not a whole lag.
    assert moved["itl_mean"] == pytest.approx(moved["tpot_mean"]) and 0 < moved["itl_mean"] < 0.01
    # From the intended send: the loop's wait plus the request's own sending lateness (20 ms on 2 of 100), less
    # the timer's millisecond of rounding.
    assert moved["ttft_from_intended_p99"] == pytest.approx((4.0 + 19.0) / 40)
    assert moved["ttft_from_intended_p50"] == 0.0


# One wake-up's lag per percentile of LAG_GRID, as a worker of `--workers 2` measured it on a quiet 2-core machine
# beside the simulator: nothing to p90, then up to a millisecond (after the timer's rounding).
_SHARED_MACHINE = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.051, 0.483, 0.729, 0.822, 1.003, 1.048)


def _gaps(n: int = 4000) -> np.ndarray:
    """Inter-token gaps as a simulator's steps give them: ~8 ms, a tail to ~14 ms where prefills join a step."""
    rng = np.random.default_rng(7)
    return 8.0 + rng.gamma(0.6, 0.6, n) + np.where(rng.random(n) < 0.03, rng.uniform(2.0, 6.0, n), 0.0)


def test_sub_millisecond_wakeups_do_not_move_a_gap_tail_they_land_on_at_random() -> None:
    gaps = _gaps()
    lateness = Lateness(_SHARED_MACHINE, _SHARED_MACHINE, late_ms=np.zeros(0))
    p99 = float(np.percentile(gaps, 99))
    assert _SHARED_MACHINE[LAG_GRID.index(99.0)] / p99 > 0.05  # paired with the largest gaps: flagged
    moved = latency_shifts({"itl": gaps}, lateness)
    assert moved["itl_p99"] < 0.01  # drawn independently: the simulator's ground truth saw 0.3-0.9%
    assert not flagged(moved, rate=None, saturated=False)
    # A gap's error is one lag less another: as often early as late, by at most the largest lag.
    errors = gap_errors_ms(_SHARED_MACHINE)
    assert np.median(errors) == 0.0 and np.percentile(errors, 99) == pytest.approx(-np.percentile(errors, 1))
    assert errors.max() <= _SHARED_MACHINE[-1] and np.percentile(errors, 99) > 0.4
    # The exact convolution on a small sample: each gap against each of the 201 errors.
    few = gaps[:50]
    (shift,) = independent_shifts_ms(few, errors, [99.0])
    assert shift == pytest.approx(np.percentile((few[:, None] + errors).ravel(), 99) - np.percentile(few, 99))


def test_a_stall_still_moves_the_gap_tail_by_about_its_length() -> None:
    gaps = _gaps()
    stalled = _grid(p95=20.0)  # one wake-up in twenty 20 ms late
    moved = latency_shifts({"itl": gaps}, Lateness(stalled, stalled, late_ms=np.zeros(0)))
    assert moved["itl_p99"] > 1.0 and "itl_p99" in flagged(moved, rate=None, saturated=False)
    assert moved["itl_p50"] < 0.05  # the median gap is not one of those the stall reached
    # Drawn independently, a stall that reaches one gap in twenty moves the p99 by about its length too.
    (shift,) = independent_shifts_ms(gaps, gap_errors_ms(stalled), [99.0])
    assert shift > 15.0


def test_lags_as_long_as_the_gaps_keep_the_pairing_bound() -> None:
    # 1 ms tokens, the loop blocked 15 ms at a time: the measured tail is the stalls' own (p99 ~16 ms against a
    # true ~1.2), so drawing lags onto the measured gaps would say it barely moved. The pairing bound stays.
    rng = np.random.default_rng(3)
    gaps = 1.2 + rng.uniform(-0.2, 0.3, 200) + np.where(rng.random(200) < 0.02, 15.0, 0.0)
    ticks = (0.0, 0.0, 0.0, 0.0, 0.166, 13.2, 13.5, 14.2, 14.5, 14.6, 14.7, 14.7)
    moved = latency_shifts({"itl": gaps}, Lateness(ticks, ticks, late_ms=np.zeros(0)))
    assert moved["itl_p99"] == pytest.approx(14.5 / np.percentile(gaps, 99))
    assert "itl_p99" in flagged(moved, rate=None, saturated=False)


def test_flags_name_the_moved_figures_and_what_follows_from_them() -> None:
    assert flagged({"itl_p50": 0.01, "itl_p99": 0.06}, rate=0.0, saturated=False) == \
        ["itl_p99"]  # a tail moved; the median, throughput and goodput did not
    moved = flagged({"ttft_p99": 0.2}, rate=0.0, saturated=False)
    assert moved == ["ttft_p99", "goodput_fraction", "goodput_requests_per_s"]  # the SLO is judged on it
    assert "output_tokens_per_s" in flagged({}, rate=0.08, saturated=False)  # sent 8% off the asked rate
    assert "output_tokens_per_s" in flagged({}, rate=0.0, saturated=True)  # its core full: it read slower
    assert flagged({"ttft_p99": 0.2}, rate=None, saturated=False, share=0.25) == []  # client.max_shift


def _phase(waits: tuple[float, ...] | None, *, late_ms: int = 0, held_ms: int = 0, cpu: float = 0.1,
           gap_ms: int = 10, ttft_ms: int = 40, hold_growth_ms: int = 0) -> PhaseStats:
    """Twenty requests a second apart, 21 tokens `gap_ms` apart after `ttft_ms`; each sent `late_ms + held_ms`
    after its intended time, `held_ms` of it by an in-flight cap."""
    records = []
    for i in range(20):
        hold = held_ms + hold_growth_ms * i
        sent = i * 1000 + late_ms + hold
        r = rec(i * 1000, sent, [sent + ttft_ms + gap_ms * k for k in range(21)], completion=21, idx=i)
        r.held_ns = hold * 1_000_000
        records.append(r)
    client = ClientCheck(loop_lag_p99_ms=None if waits is None else waits[LAG_GRID.index(99.0)], cpu_share=cpu,
                         runq_share=0.4, load_per_core=0.8, loop_wait_quantiles_ms=waits, loop_tick_quantiles_ms=waits)
    return phase_stats(records, SLO(), client=client)


def test_a_quiet_loop_moves_nothing() -> None:
    stats = _phase(_grid(p100=0.4))
    assert not stats.client_limited and stats.client_limited_metrics == [] and stats.client.verdict == "ok"


def test_a_lag_over_the_old_5_ms_bound_on_long_latencies_is_not_client_limited() -> None:
    # 6 ms of wait at p99 against 400 ms first tokens and 200 ms gaps: under 5% of every figure.
    records_stats = _phase(_grid(p99=6.0, p100=6.0), gap_ms=200, ttft_ms=400)
    assert records_stats.client.loop_lag_p99_ms == 6.0
    assert "ttft_p99" in records_stats.client_moved  # said, as a share …
    assert not records_stats.client_limited  # … and too small to distrust


def test_the_same_lag_on_short_gaps_flags_only_the_figures_it_reaches() -> None:
    stats = _phase(_grid(p99=6.0, p100=6.0))
    assert stats.client_limited
    assert {"itl_p99", "ttft_p99"} <= set(stats.client_limited_metrics)  # 6 ms on 10 ms gaps, on 40 ms TTFTs
    # Not the medians, nor a 240 ms E2E (2.5%), nor the rates.
    assert not {"itl_p50", "ttft_p50", "tpot_p50", "e2e_p99", "output_tokens_per_s"} & set(stats.client_limited_metrics)
    assert stats.untrusted("itl_p99") and not stats.untrusted("itl_p50")
    assert stats.client.verdict == "not_scheduled"  # the cause: it waited for a CPU another process held
    reason = stats.client_limited_reason or ""
    assert "its core is shared" in reason and "itl_p99 by ~" in reason  # load below the cores: no one else blamed


def test_a_caps_hold_is_not_lateness() -> None:
    held = _phase(_grid(p100=0.4), held_ms=500)
    assert held.latency_ms.schedule_lag.p99 == pytest.approx(500.0)  # shown, as the design says …
    assert not held.client_limited  # … and not the client's fault
    # A cap that holds more and more back slows the sent rate by design: not the client's either.
    growing = _phase(_grid(p100=0.4), held_ms=0)
    records_held = _phase(_grid(p100=0.4), held_ms=0, hold_growth_ms=100)
    assert not growing.client_limited and records_held.load.sent_rps < 0.95 * (records_held.load.offered_rps or 0)
    assert not records_held.client_limited, records_held.client_limited_reason
    late = _phase(_grid(p100=0.4), late_ms=500)
    assert late.client_limited and "ttft_from_intended_p50" in late.client_limited_metrics
    assert "ttft_p50" not in late.client_limited_metrics  # measured from the send: not moved


def test_without_the_waits_shape_the_phase_is_judged_whole() -> None:
    # A summary from before the per-figure judgement: the old bound, and every figure untrusted.
    stats = _phase(None, late_ms=30)
    assert stats.client_limited and stats.client_limited_metrics == []
    assert stats.untrusted("itl_p50") and stats.untrusted("output_tokens_per_s")
