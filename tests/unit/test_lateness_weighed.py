"""A late harness is weighed against what its lateness could distort (issue 34): event-loop lag p99 against
the median ITL (a token stamped late), schedule lag p99 against the median TTFT (a request sent late)."""

from __future__ import annotations

from harness.config.scenario import SLO
from harness.stats.phase import phase_stats
from harness.stats.schema import PhaseStats
from harness.stats.summary import negligible_lateness
from harness.stats.verdict import ClientCheck
from tests.helpers import rec


def _phase(gap_ms: int, loop_lag_ms: float, send_lag_ms: int = 0) -> PhaseStats:
    """Ten requests of 20 tokens `gap_ms` apart, TTFT 400 ms, each sent `send_lag_ms` late; the self-check saw
    `loop_lag_ms` of event-loop lag p99 at 2% of a core, waiting for a CPU (another process held the cores)."""
    records = [rec(i * 5000, i * 5000 + send_lag_ms, [i * 5000 + 400 + gap_ms * k for k in range(20)], completion=20,
                   idx=i) for i in range(10)]
    client = ClientCheck(loop_lag_p99_ms=loop_lag_ms, cpu_share=0.02, runq_share=0.4, load_per_core=0.8)
    return phase_stats(records, SLO(), client=client)


def test_a_few_ms_late_on_tokens_80_ms_apart_is_not_the_client_limiting() -> None:
    stats = _phase(gap_ms=80, loop_lag_ms=6.0)
    assert stats.client_limited  # the self-check saw it late …
    excuse = negligible_lateness(stats, None)
    assert excuse is not None and excuse[0].startswith("not client-limited") and not excuse[1]
    assert "event-loop lag p99 (6.0 ms) was under 10% of the median ITL (80.0 ms)" in excuse[0]


def test_the_same_lag_on_tokens_40_ms_apart_stays_the_clients() -> None:
    stats = _phase(gap_ms=40, loop_lag_ms=6.0)
    assert stats.client_limited
    assert negligible_lateness(stats, None) is None


def test_a_send_late_by_more_than_a_twentieth_of_the_ttft_stays_the_clients() -> None:
    # 6 ms of loop lag on 80 ms tokens would be excused; requests sent 30 ms late on a 400 ms TTFT are not.
    late_sends = _phase(gap_ms=80, loop_lag_ms=6.0, send_lag_ms=30)
    assert late_sends.client_limited
    assert negligible_lateness(late_sends, None) is None
