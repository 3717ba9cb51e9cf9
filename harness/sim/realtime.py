"""Real-time drivers: they decide when tokens are released, on absolute deadlines.

`StepDriver` runs the step engine: each step ends at an absolute deadline and all its tokens are
released then. `FixedTimingDriver` ignores load entirely: token i of a request is released at
arrival + TTFT + i·ITL, which makes it the reference for calibrating clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import heapq
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from harness.clock import NS_PER_MS, NS_PER_S, Clock, MonotonicClock
from harness.sim.engine import Engine, SimRequest, StepAccount, TokenTally

_EARLY_GC_OBJECTS = 2_000  # young objects worth collecting ahead of time (a fifth of the simulator's threshold)
_EARLY_GC_SLACK_NS = 5 * NS_PER_MS  # time left before a step's deadline for that collection to end well before it
# Past this much lateness the simulator stops trying to catch up with its own schedule:
# it is overloaded, and pretending otherwise would emit a burst of back-dated steps.
_RESYNC_NS = 50 * NS_PER_MS

LatenessObserver = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Snapshot:
    running: int
    waiting: int
    kv_usage: float
    preemptions: int
    prefix_query_tokens: int
    prefix_hit_tokens: int
    generation_tokens: int
    prompt_tokens: int
    stress: StepAccount | None = None  # the engine's running account (None: fixed timing has no device)
    peaks: tuple[float, float] | None = None  # bytes/s, FLOP/s


class StepGate:
    """When the step under way is due. Work that would still be running then (a request's intake, a scrape's
    rendering) waits until the step has ended instead: one event loop serves both, and a burst of 64 requests
    (~0.25 ms each) made the quickstart's steps 6–16 ms late — where vLLM's API server runs beside its engine
    core, not in its way. Each waits at most one step, so nothing starves however short the steps."""

    def __init__(self, clock: Clock, early_gc: bool = False) -> None:
        self._clock = clock
        self._early_gc = early_gc  # real time only: in virtual time nothing is late
        self._due: int | None = None
        self._ended: asyncio.Event | None = None  # made when someone first waits on this step
        self._then: list[Callable[[], None]] = []

    def due(self, deadline_ns: int) -> None:
        self._due = deadline_ns
        # A young collection (1–5 ms at the simulator's 10,000 objects) taken now, with the step's time ahead,
        # rather than wherever an allocation tips it over: into a deadline.
        if (self._early_gc and gc.get_count()[0] > _EARLY_GC_OBJECTS
                and deadline_ns - self._clock.now_ns() > _EARLY_GC_SLACK_NS):
            gc.collect(0)

    def ended(self) -> None:
        self._due = None
        if self._ended is not None:
            self._ended.set()
            self._ended = None
        if self._then:
            loop = asyncio.get_running_loop()
            for callback in self._then:  # after the next step is scheduled: soon, not now
                loop.call_soon(callback)
            self._then = []

    def near(self, cost_ns: int) -> bool:
        """Whether work of about `cost_ns` started now would still be running when the step is due."""
        return self._due is not None and self._due - self._clock.now_ns() < cost_ns

    def after(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the step under way has ended (a protocol callback cannot await)."""
        self._then.append(callback)

    async def clear(self, cost_ns: int) -> None:
        """Return once work of about `cost_ns` can run without delaying the step under way."""
        if not self.near(cost_ns):
            return
        if self._ended is None:
            self._ended = asyncio.Event()
        await self._ended.wait()


class Driver(Protocol):
    steps: int
    resyncs: int
    lateness_ns: deque[int]
    gate: StepGate

    def submit(self, req: SimRequest) -> None: ...

    def abort(self, req: SimRequest) -> None: ...

    async def run(self) -> None: ...

    def snapshot(self) -> Snapshot: ...


class DriverBase:
    def __init__(self, clock: Clock | None, on_lateness: LatenessObserver | None) -> None:
        self.clock: Clock = clock or MonotonicClock()
        self.steps = 0
        self.resyncs = 0
        self.lateness_ns: deque[int] = deque(maxlen=10_000)  # recent releases: woke − deadline
        self._on_lateness = on_lateness
        self._wake = asyncio.Event()
        # a fleet's servers each keep their own; the fleet's is never due
        self.gate = StepGate(self.clock, early_gc=isinstance(self.clock, MonotonicClock))

    def _record_lateness(self, late_ns: int) -> None:
        self.steps += 1
        self.lateness_ns.append(late_ns)
        if self._on_lateness is not None:
            self._on_lateness(late_ns)


class StepDriver(DriverBase):
    """`settle`, when given, runs before each step is scheduled: in virtual time it lets every request that
    arrives at the instant a step ends (a closed-loop user's next, the next batch) join the next step, as
    a real server's arrivals during a step do."""

    def __init__(self, engine: Engine, clock: Clock | None = None, on_lateness: LatenessObserver | None = None,
                 settle: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(clock, on_lateness)
        self.engine = engine
        self._settle = settle

    def submit(self, req: SimRequest) -> None:
        self.engine.add(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        self.engine.abort(req)

    def snapshot(self) -> Snapshot:
        e = self.engine
        return Snapshot(len(e.running), len(e.waiting), e.kv_usage, e.num_preemptions, e.pool.query_tokens,
                        e.pool.hit_tokens, e.tokens.generation, e.tokens.prompt, e.stress, e.peaks)

    async def run(self) -> None:
        deadline: int | None = None
        while True:
            if not self.engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                deadline = None
            if self._settle is not None:
                await self._settle()
            now = self.clock.now_ns()
            # Steps run back to back: the next starts at the previous deadline, not at wake-up,
            # so timer lateness does not accumulate into lost throughput.
            behind = deadline is not None and now - deadline > _RESYNC_NS
            self.resyncs += behind
            start = now if deadline is None or behind else deadline
            step = self.engine.schedule(start)
            deadline = start + step.duration_ns
            self.gate.due(deadline)
            await self.clock.sleep_until(deadline)
            woke = self.clock.now_ns()
            self._record_lateness(woke - deadline)
            self.engine.complete(step, woke)
            self.gate.ended()


class FixedTimingDriver(DriverBase):
    """Constant TTFT and ITL whatever the load, each request on its own exact schedule.

    `per_token`: a request gets at most one token per pass over what is due, and the event loop turns
    between passes, so tokens due together (zero ITL, or a driver behind its schedule) still leave one by one.
    """

    def __init__(self, ttft_ns: int, itl_ns: int, clock: Clock | None = None,
                 on_lateness: LatenessObserver | None = None, per_token: bool = False) -> None:
        super().__init__(clock, on_lateness)
        self.ttft_ns = ttft_ns
        self.itl_ns = itl_ns
        self.per_token = per_token
        self._due: list[tuple[int, int, SimRequest]] = []
        self._seq = itertools.count()
        self._active = 0
        self._tokens = TokenTally()

    def submit(self, req: SimRequest) -> None:
        heapq.heappush(self._due, (req.arrival_ns + self.ttft_ns, next(self._seq), req))
        self._active += 1
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        if not (req.aborted or req.finished):
            req.aborted = True  # dropped lazily when its next deadline comes up
            self._active -= 1

    def snapshot(self) -> Snapshot:
        return Snapshot(self._active, 0, 0.0, 0, 0, 0, self._tokens.generation, self._tokens.prompt)

    async def run(self) -> None:
        while True:
            if not self._due:
                self._wake.clear()
                await self._wake.wait()
                continue
            deadline = self._due[0][0]
            lead = deadline - self.clock.now_ns()
            if lead > 2 * NS_PER_MS:
                # Wait coarsely, but wake for a new request whose first token may be due sooner.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), (lead - NS_PER_MS) / NS_PER_S)
                continue
            self.gate.due(deadline)
            await self.clock.sleep_until(deadline)
            self._release(deadline)
            self.gate.ended()
            if self._due and self._due[0][0] <= self.clock.now_ns():
                await asyncio.sleep(0)  # already due again: let the writes and new requests through first

    def _release(self, deadline: int) -> None:
        now = self.clock.now_ns()
        self._record_lateness(now - deadline)
        again: list[tuple[int, int, SimRequest]] = []
        # locals: at the zero-delay ceiling this loop runs for every token the simulator writes
        heap, emit, seq, ttft_ns, itl_ns = self._due, self._tokens.emit, self._seq, self.ttft_ns, self.itl_ns
        while heap and heap[0][0] <= now:
            req = heapq.heappop(heap)[2]
            if req.aborted:
                continue
            if emit(req, now):
                self._active -= 1
            else:
                due = req.arrival_ns + ttft_ns + req.generated * itl_ns
                if self.per_token and due <= now:
                    again.append((due, next(seq), req))  # its next token goes in the next pass
                else:
                    heapq.heappush(heap, (due, next(seq), req))
            if req.on_token is not None:
                req.on_token(req)
        for entry in again:
            heapq.heappush(heap, entry)
