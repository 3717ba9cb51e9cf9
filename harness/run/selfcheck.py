"""The harness watching itself: event-loop lag and its own CPU use while it drives load.

A client that cannot keep up inflates every latency it reports. A ticker sleeps a fixed interval
and records how late it wakes (the event loop's lag); CPU time over wall time says how much of a
core the process burns. Both are summarised per phase, and the first time either crosses its
bound a warning goes out once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S, Clock, cancel_quietly
from harness.stats.phase import ClientCheck

_TICK_NS = 10 * NS_PER_MS
_WINDOW_TICKS = 100  # live check over the last second


class SelfCheck:
    def __init__(self, clock: Clock, loop_lag_bound_ms: float = 5.0, cpu_bound: float = 0.9,
                 warn: Callable[[str], None] | None = None,
                 cpu_time: Callable[[], float] = time.process_time) -> None:
        self.clock = clock
        self.loop_lag_bound_ms = loop_lag_bound_ms
        self.cpu_bound = cpu_bound
        self._warn = warn
        self._cpu_time = cpu_time
        self.lags_ns: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self.warned = False

    def start(self) -> None:
        # numpy's first percentile imports numpy.ma (~9 ms here): pay that now, not a second into the load,
        # where it showed as a 10 ms stall in the schedule.
        np.percentile(np.zeros(1), 99)
        self._task = asyncio.ensure_future(self._tick())

    async def stop(self) -> None:
        await cancel_quietly(self._task)

    def mark(self) -> tuple[int, float, int]:
        """A point to measure from: (samples so far, CPU seconds, now)."""
        return len(self.lags_ns), self._cpu_time(), self.clock.now_ns()

    def since(self, mark: tuple[int, float, int]) -> ClientCheck:
        index, cpu0, t0 = mark
        lags = self.lags_ns[index:]
        wall_s = (self.clock.now_ns() - t0) / NS_PER_S
        cpu_s = self._cpu_time() - cpu0
        return ClientCheck(
            loop_lag_p99_ms=float(np.percentile(lags, 99)) / NS_PER_MS if lags else None,
            cpu_share=cpu_s / wall_s if wall_s > 0 else None,
            loop_lag_bound_ms=self.loop_lag_bound_ms, cpu_bound=self.cpu_bound, cpu_seconds=cpu_s,
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
        if self.warned or self._warn is None:
            return
        problems = []
        if check.loop_lag_p99_ms is not None and check.loop_lag_p99_ms > self.loop_lag_bound_ms:
            problems.append(f"event loop {check.loop_lag_p99_ms:.1f} ms late (p99)")
        if check.cpu_share is not None and check.cpu_share > self.cpu_bound:
            problems.append(f"harness at {check.cpu_share:.0%} of a core")
        if problems:
            self.warned = True
            self._warn("the client may be the bottleneck: " + ", ".join(problems) +
                       "; latencies it reports may be inflated (see client_limited in summary.json)")
