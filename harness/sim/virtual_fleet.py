"""A deployment's engines in virtual time without asyncio or a network: `harness plan`'s trials, hundreds of
deployments a minute.

The same engines, routers and KV transfer as the served fleet (sim/fleet.py), stepped by one event loop:
the next event is the earliest of an arrival, a KV landing and a step's end. At one instant, steps end first,
then arrivals and landings are routed, then every idle engine with work starts its next step — as the real
drivers order them (an arrival at a step's end joins the next step).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence

from harness.clock import NS_PER_S
from harness.sim.decode_ahead import decode_ahead
from harness.sim.engine import Engine, SimRequest, Step
from harness.sim.fleet import Handoff, Servers, handed_over, prefill_run


class GiveUp(Exception):
    """Raised from a request's `on_token` to end the run early."""


class VirtualFleet:
    def __init__(self, decode: Servers, prefill: Servers | None, handoff: Handoff, jump: bool = True) -> None:
        self.decode, self.prefill, self._handoff, self._jump = decode, prefill, handoff, jump
        self._engines: list[Engine] = [*decode.engines, *(prefill.engines if prefill is not None else ())]
        self._steps: list[Step | None] = [None] * len(self._engines)
        self._ends: list[int | None] = [None] * len(self._engines)
        self._landings: list[tuple[int, int, SimRequest, SimRequest, int]] = []
        self._seq = itertools.count()
        self.now = 0

    def run(self, requests: Sequence[SimRequest]) -> bool:
        """Serve `requests` (sorted by arrival) to the end; False when a request's callback gave up first."""
        arrivals = iter(requests)
        upcoming = next(arrivals, None)
        try:
            while True:
                when = self._next(upcoming)
                if when is None:
                    return True
                self.now = when
                self._end_steps()
                while upcoming is not None and upcoming.arrival_ns <= when:
                    self._arrive(upcoming)
                    upcoming = next(arrivals, None)
                self._land()
                self._start_steps(upcoming.arrival_ns if upcoming is not None else None)
        except GiveUp:
            return False

    def _next(self, upcoming: SimRequest | None) -> int | None:
        times = [end for end in self._ends if end is not None]
        if upcoming is not None:
            times.append(upcoming.arrival_ns)
        if self._landings:
            times.append(self._landings[0][0])
        return min(times) if times else None

    def _end_steps(self) -> None:
        for i, end in enumerate(self._ends):
            if end == self.now:
                step = self._steps[i]
                self._ends[i] = self._steps[i] = None
                if step is not None:  # (None: decode steps taken ahead, applied already)
                    self._engines[i].complete(step, self.now)

    def _start_steps(self, arrival: int | None) -> None:
        first = len(self.decode.engines)
        order = [*range(first, len(self._engines)), *range(first)]  # prefill steps first: they bound the jumps
        horizon = None
        for i in order:
            engine = self._engines[i]
            if self._ends[i] is not None or not engine.has_work():
                continue
            if i < first and self._jump:
                horizon = self._horizon(arrival) if horizon is None else horizon
                if (end := decode_ahead(engine, self.now, horizon)) is not None:
                    self._ends[i] = end
                    continue
            step = engine.schedule(self.now)
            if step.work:
                self._steps[i], self._ends[i] = step, self.now + step.duration_ns

    def _horizon(self, arrival: int | None) -> int:
        """The earliest a request could reach any engine: the next arrival, the next KV landing, the end of a
        prefill step under way (its prompt lands no sooner)."""
        times = [arrival] if arrival is not None else []
        if self._landings:
            times.append(self._landings[0][0])
        if self.prefill is not None:
            first = len(self.decode.engines)
            times += [end for end in self._ends[first:] if end is not None]
        return min(times, default=1 << 62)

    def _arrive(self, req: SimRequest) -> None:
        if self.prefill is None:
            self._route(self.decode, req)
            return
        ahead = prefill_run(req)
        server = self._route(self.prefill, ahead)
        ahead.on_token = lambda done: self._prefilled(req, done, server)

    def _route(self, pool: Servers, req: SimRequest) -> int:
        server = pool.picker.pick(req, pool.engines)
        pool.engines[server].add(req)
        return server

    def _prefilled(self, req: SimRequest, ahead: SimRequest, server: int) -> None:
        if (seconds := handed_over(req, ahead, self._handoff)) is None:
            assert self.prefill is not None
            self.prefill.engines[server].release(ahead)
            return
        heapq.heappush(self._landings, (self.now + round(seconds * NS_PER_S), next(self._seq), req, ahead, server))

    def _land(self) -> None:
        while self._landings and self._landings[0][0] <= self.now:
            _, _, req, ahead, server = heapq.heappop(self._landings)
            assert self.prefill is not None
            self.prefill.engines[server].release(ahead)
            req.external = req.prompt_tokens
            self._route(self.decode, req)
