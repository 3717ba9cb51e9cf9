"""The step engine run in virtual time without asyncio: engine and performance-model tests, and
bench/vllm_compat.py.

Steps start back to back while there is work; an idle engine jumps to the next arrival. A callback
on each finished request may submit more (the next batch, a closed-loop user's next request), so
every load model of the harness can be replayed without a network.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from harness.sim.engine import Engine, SimRequest

OnFinish = Callable[[SimRequest], None]


class VirtualRun:
    def __init__(self, engine: Engine, start_ns: int = 0) -> None:
        self.engine = engine
        self.now = start_ns
        self._arrivals: list[tuple[int, int, SimRequest]] = []
        self._seq = itertools.count()
        self._on_finish: OnFinish | None = None

    def submit(self, req: SimRequest) -> None:
        req.on_token = self._token
        heapq.heappush(self._arrivals, (req.arrival_ns, next(self._seq), req))

    def _token(self, req: SimRequest) -> None:
        if req.finished and self._on_finish is not None:
            self._on_finish(req)

    def run(self, on_finish: OnFinish | None = None) -> int:
        """Run until every submitted request (and any submitted on the way) has finished; returns the time."""
        self._on_finish = on_finish
        engine, arrivals = self.engine, self._arrivals
        while arrivals or engine.has_work():
            while arrivals and arrivals[0][0] <= self.now:
                engine.add(heapq.heappop(arrivals)[2])
            if not engine.has_work():
                self.now = arrivals[0][0]
                continue
            step = engine.schedule(self.now)
            if not step.work:
                if not arrivals:
                    raise RuntimeError("engine stuck: requests wait that can never be scheduled")
                self.now = max(self.now, arrivals[0][0])
                continue
            self.now += step.duration_ns
            engine.complete(step, self.now)
        return self.now


def run_virtual(engine: Engine, requests: list[SimRequest]) -> int:
    """Run requests (with their `arrival_ns`) to completion; returns the end time."""
    run = VirtualRun(engine, min((r.arrival_ns for r in requests), default=0))
    for req in requests:
        run.submit(req)
    return run.run()
