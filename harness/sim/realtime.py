"""Drives the engine in real time: each step ends at an absolute deadline, tokens are released then."""

from __future__ import annotations

import asyncio
from collections import deque

from harness.clock import NS_PER_MS, Clock, MonotonicClock
from harness.sim.engine import Engine, SimRequest

# Past this much lateness the simulator stops trying to catch up with its own schedule:
# it is overloaded, and pretending otherwise would emit a burst of back-dated steps.
_RESYNC_NS = 50 * NS_PER_MS


class RealtimeDriver:
    def __init__(self, engine: Engine, clock: Clock | None = None) -> None:
        self.engine = engine
        self.clock: Clock = clock or MonotonicClock()
        self.steps = 0
        self.resyncs = 0
        self.lateness_ns: deque[int] = deque(maxlen=10_000)  # recent steps: woke − deadline
        self._wake = asyncio.Event()

    def submit(self, req: SimRequest) -> None:
        self.engine.add(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        self.engine.abort(req)

    async def run(self) -> None:
        deadline: int | None = None
        while True:
            if not self.engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                deadline = None
            now = self.clock.now_ns()
            # Steps run back to back: the next starts at the previous deadline, not at wake-up,
            # so timer lateness does not accumulate into lost throughput.
            behind = deadline is not None and now - deadline > _RESYNC_NS
            self.resyncs += behind
            start = now if deadline is None or behind else deadline
            step = self.engine.schedule(start)
            deadline = start + step.duration_ns
            await self.clock.sleep_until(deadline)
            woke = self.clock.now_ns()
            self.lateness_ns.append(woke - deadline)
            self.steps += 1
            self.engine.complete(step, woke)
