import asyncio
import time

import pytest

from harness.clock import NS_PER_MS, NS_PER_S, FakeClock, MonotonicClock
from harness.config.scenario import SLO
from harness.run.selfcheck import SelfCheck
from harness.stats.verdict import ClientCheck
from harness.voice import Heard
from tests.helpers import phase_json, rec

pytestmark = pytest.mark.timing  # the self-check measures this machine's CPU and event-loop lag


class FakeCPU:
    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds


def test_cpu_share_and_loop_lag_since_a_mark() -> None:
    """The share is the event loop's thread's; the seconds are the process's, the building thread's included."""
    clock, cpu, loop_cpu, idle = FakeClock(), FakeCPU(), FakeCPU(), FakeCPU()
    check = SelfCheck(clock, cpu_time=cpu, loop_cpu_time=loop_cpu, idle=idle)
    mark = check.mark()
    check.lags_ns.extend([0] * 98 + [20 * NS_PER_MS] * 2)
    clock.advance_to(2 * NS_PER_S)
    cpu.seconds, loop_cpu.seconds, idle.seconds = 1.9, 1.5, 5.0
    result = check.since(mark)
    assert result.cpu_share == pytest.approx(0.75) and result.cpu_seconds == pytest.approx(1.9)
    assert result.loop_lag_p99_ms == pytest.approx(20.0)
    assert result.idle_cores == pytest.approx(2.5)  # 5 idle CPU seconds over 2 s: two and a half cores idle


def test_the_machines_idle_time_is_read_where_linux_gives_it() -> None:
    from harness.run.selfcheck import machine_idle_s

    first = machine_idle_s()
    if first is None:
        pytest.skip("no /proc/stat: not Linux")
    time.sleep(0.05)
    second = machine_idle_s()
    assert second is not None and second >= first > 0


def test_warns_once_when_over_a_bound() -> None:
    warnings: list[str] = []
    check = SelfCheck(FakeClock(), cpu_bound=0.9, voice=Heard(warned=warnings))
    check._check(ClientCheck(loop_lag_p99_ms=1.0, cpu_share=0.5))
    assert warnings == []
    check._check(ClientCheck(loop_lag_p99_ms=12.0, cpu_share=0.97))
    check._check(ClientCheck(loop_lag_p99_ms=30.0, cpu_share=0.99))
    assert len(warnings) == 1
    assert warnings[0].startswith("harness saturated: event-loop lag p99 12.0 ms > 5.0 ms at 97% of a core — so far")
    assert [v for _, v, _ in check.windows] == ["saturated", "saturated"]


def test_the_live_warning_and_the_phase_verdict_read_the_same_ticks() -> None:
    """A second with a 400 ms stall warns at once (its time-weighted wait is over the bound) and says the figures
    come later; the phase's verdict, from the same ticks, then names the figures that stall could have moved: the
    tails of 50 ms first tokens, not their median. A second of timer rounding alone warns of nothing."""
    warnings: list[str] = []
    clock, cpu = FakeClock(), FakeCPU()
    check = SelfCheck(clock, voice=Heard(warned=warnings), cpu_time=cpu, sched=lambda: (0, 0), load=lambda: 0.2)
    mark = check.mark()
    check.lags_ns.extend([NS_PER_MS // 2] * 100)  # 10 ms ticks woken half a millisecond late: libuv's rounding
    check._check(check.since(mark))
    assert warnings == []
    check.lags_ns.extend([0] * 60 + [400 * NS_PER_MS])
    check._check(check.since(mark))
    assert len(warnings) == 1 and "so far: when the phase ends its verdict says" in warnings[0]
    clock.advance_to(10 * NS_PER_S)
    phase = check.since(mark)
    records = [rec(i * 10, i * 10, [i * 10 + 50], completion=1, idx=i) for i in range(100)]
    summary = phase_json(records, SLO(), client=phase)
    assert summary["client_limited"] is True and summary["client"]["verdict"] == "stalled"
    assert "ttft_p99" in summary["client_limited_metrics"] and "ttft_p50" not in summary["client_limited_metrics"]


async def test_ticker_measures_a_blocked_loop() -> None:
    check = SelfCheck(MonotonicClock())
    check.start()
    await asyncio.sleep(0.05)
    time.sleep(0.08)  # block the event loop, as a client overwhelmed with work would
    await asyncio.sleep(0.05)
    await check.stop()
    assert max(check.lags_ns) >= 50 * NS_PER_MS


def test_client_check_marks_a_phase_client_limited_with_every_reason() -> None:
    records = [rec(i * 10, i * 10, [i * 10 + 50], completion=1, idx=i) for i in range(5)]
    healthy = phase_json(records, SLO(), client=ClientCheck(loop_lag_p99_ms=1.0, cpu_share=0.3))
    assert healthy["client_limited"] is False and healthy["client"]["cpu_share"] == 0.3
    busy = phase_json(records, SLO(), client=ClientCheck(loop_lag_p99_ms=9.0, cpu_share=0.95))
    assert busy["client_limited"] is True and busy["client"]["verdict"] == "saturated"
    assert busy["client_limited_reason"] == "harness saturated: event-loop lag p99 9.0 ms > 5.0 ms at 95% of a core"
    hot = phase_json(records, SLO(), client=ClientCheck(loop_lag_p99_ms=1.0, cpu_share=0.95))
    assert hot["client_limited_reason"] == "harness saturated: CPU above 90% at 95% of a core"


def test_lazy_imports_are_paid_before_the_load_starts() -> None:
    """numpy's first percentile imports numpy.ma (~9 ms): the self-check pays it when it starts, not at its
    first reading one second into the load. A fresh process, since this one has imported it long ago."""
    import subprocess
    import sys

    code = ("import asyncio, sys\nfrom harness.clock import MonotonicClock\n"
            "from harness.run.selfcheck import SelfCheck\n"
            "async def main():\n    before = 'numpy.ma' in sys.modules\n    check = SelfCheck(MonotonicClock())\n"
            "    check.start()\n    print(before, 'numpy.ma' in sys.modules)\n    await check.stop()\n"
            "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
