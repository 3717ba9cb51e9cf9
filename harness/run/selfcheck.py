"""The harness watching itself: event-loop lag, its own CPU use, and whether it got a CPU when it wanted one.

A client that cannot keep up inflates every latency it reports. A ticker sleeps a fixed interval and records
how late it wakes (the event loop's lag); the loop thread's CPU time over wall time says how much of a core
the loop burns (the thread that builds requests ahead runs only on idle CPU, so it is counted in the process's
CPU seconds but not in the share); the kernel's run-queue delay of the main thread (`/proc/self/schedstat`)
says how long it waited for a CPU. Every second the wait a token met for the loop (time-weighted,
`harness.stats.distortion.wait_quantiles`) is judged against the lag bound: the first second that is not ok is
warned about once. A phase's verdict is then made figure by figure (how far that wait could have moved each
one), so the warning says the figures come later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S, Clock, cancel_quietly
from harness.stats.distortion import LAG_P99, tick_quantiles, wait_quantiles
from harness.stats.verdict import RANK, ClientCheck, Verdict, lateness, verdict
from harness.voice import QUIET, Voice

_TICK_NS = 10 * NS_PER_MS
_WINDOW_TICKS = 100  # live check over the last second
_SCHEDSTAT = Path("/proc/self/schedstat")


def schedstat() -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting for one) of this process's main thread; None off Linux."""
    try:
        run_ns, wait_ns, *_ = _SCHEDSTAT.read_text().split()
        return int(run_ns), int(wait_ns)
    except (OSError, ValueError):
        return None


_STAT = Path("/proc/stat")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def machine_idle_s() -> float | None:
    """CPU seconds every core of the machine has spent idle since boot (Linux /proc/stat); None elsewhere."""
    try:
        fields = _STAT.read_text().split("\n", 1)[0].split()
        return (int(fields[4]) + int(fields[5])) / _TICKS_PER_S  # idle + iowait
    except (OSError, ValueError, IndexError):
        return None


def load_per_core() -> float | None:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return None


Mark = tuple[int, float, float, int, tuple[int, int] | None, float | None]


class SelfCheck:
    def __init__(self, clock: Clock, loop_lag_bound_ms: float = 5.0, cpu_bound: float = 0.9,
                 voice: Voice = QUIET,
                 cpu_time: Callable[[], float] = time.process_time,
                 loop_cpu_time: Callable[[], float] | None = None,
                 sched: Callable[[], tuple[int, int] | None] = schedstat,
                 load: Callable[[], float | None] = load_per_core,
                 late: Callable[[], None] | None = None,
                 idle: Callable[[], float | None] = machine_idle_s, max_shift: float = 0.05) -> None:
        self.clock = clock
        self.loop_lag_bound_ms = loop_lag_bound_ms
        self.cpu_bound = cpu_bound
        self.max_shift = max_shift
        self.voice = voice
        self._cpu_time = cpu_time
        # The mark and the check run on the event loop's thread: its own CPU clock is the loop's.
        self._loop_cpu_time = loop_cpu_time or (time.thread_time if cpu_time is time.process_time else cpu_time)
        self._sched = sched
        self._load = load
        self._idle = idle
        self._late = late  # told of every second that was not ok (the live exporter's gauge)
        self.lags_ns: list[int] = []
        self.windows: list[tuple[int, Verdict, str]] = []  # live verdicts: (samples at the window's end, …)
        self._task: asyncio.Task[None] | None = None
        self.warned = False

    def start(self) -> None:
        # numpy's first percentile imports numpy.ma (~9 ms here): pay that now, not a second into the load,
        # where it showed as a 10 ms stall in the schedule.
        np.percentile(np.zeros(1), 99)
        self._task = asyncio.ensure_future(self._tick())

    async def stop(self) -> None:
        await cancel_quietly(self._task)

    def mark(self) -> Mark:
        """A point to measure from: (samples so far, process and loop CPU seconds, now, scheduler times)."""
        return (len(self.lags_ns), self._cpu_time(), self._loop_cpu_time(), self.clock.now_ns(), self._sched(),
                self._idle())

    def since(self, mark: Mark) -> ClientCheck:
        index, cpu0, loop0, t0, sched0, idle0 = mark
        idle1 = self._idle()
        lags = self.lags_ns[index:]
        wall_s = (self.clock.now_ns() - t0) / NS_PER_S
        cpu_s = self._cpu_time() - cpu0
        loop_s = self._loop_cpu_time() - loop0
        sched1 = self._sched()
        runq = None
        if sched0 is not None and sched1 is not None:
            ran, waited = sched1[0] - sched0[0], sched1[1] - sched0[1]
            runq = waited / (ran + waited) if ran + waited > 0 else None
        live = [(v, why) for end, v, why in self.windows if end > index]
        live_verdict, live_reason = max(live, key=lambda w: RANK[w[0]], default=("ok", ""))
        return ClientCheck(
            loop_lag_p99_ms=float(np.percentile(lags, 99)) / NS_PER_MS if lags else None,
            cpu_share=loop_s / wall_s if wall_s > 0 else None,
            loop_lag_bound_ms=self.loop_lag_bound_ms, cpu_bound=self.cpu_bound, cpu_seconds=cpu_s,
            runq_share=runq, load_per_core=self._load(), live_verdict=live_verdict, live_reason=live_reason,
            idle_cores=None if idle0 is None or idle1 is None or wall_s <= 0 else (idle1 - idle0) / wall_s,
            loop_wait_quantiles_ms=wait_quantiles(np.asarray(lags, dtype=np.float64) / NS_PER_MS,
                                                  _TICK_NS / NS_PER_MS),
            loop_tick_quantiles_ms=tick_quantiles(np.asarray(lags, dtype=np.float64) / NS_PER_MS),
            max_shift=self.max_shift,
        )

    async def _tick(self) -> None:
        window = self.mark()
        while True:
            before = self.clock.now_ns()
            await asyncio.sleep(_TICK_NS / NS_PER_S)
            self.lags_ns.append(max(0, self.clock.now_ns() - before - _TICK_NS))
            if len(self.lags_ns) - window[0] >= _WINDOW_TICKS:
                self._check(self.since(window))
                window = self.mark()

    def _check(self, check: ClientCheck) -> None:
        if check.loop_wait_quantiles_ms is not None:  # judged by the wait a token met, as the phase's figures are
            check = dataclasses.replace(check, loop_lag_p99_ms=check.loop_wait_quantiles_ms[LAG_P99])
        name, reason = verdict(lateness(check), check)
        if name == "ok":
            return
        self.windows.append((len(self.lags_ns), name, reason))
        if self._late is not None:
            self._late()
        if not self.warned:
            self.warned = True
            self.voice.warn(f"{reason} — so far: when the phase ends its verdict says which figures this could have "
                            "moved, if any (client_limited_metrics in summary.json)")
