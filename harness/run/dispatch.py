"""The dispatcher: a phase's lifecycle — its requests in flight, stopping, the grace period, its records — around
a pacer that says when each request leaves (`harness.run.pacers`: open-loop arrivals at absolute deadlines, fixed
batches, closed-loop users, conversations).

Requests come from a `Lookahead`: built (prompt and body bytes) on a worker thread before their time.

Sending and requests in flight are separate tasks: `stop()` ends the sending at once, lets the
requests in flight finish within a grace period, then cancels the rest, which are recorded as
`cancelled`. Every record reaches the sink the moment its request ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Executor
from typing import Any

from harness.client.backend import Backend
from harness.clock import Clock
from harness.records import RequestRecord
from harness.run.lookahead import DEFAULT_HORIZON_NS, DEFAULT_MAX_AHEAD, Lookahead
from harness.run.pacers import arrivals, users
from harness.run.pacers import batches as batch_pacer
from harness.run.pacers import conversations as talks
from harness.run.pacers.batches import Barrier
from harness.run.worker import run_request
from harness.workload.requests import RequestSpec
from harness.workload.sessions import ConversationSource

Sink = Callable[[RequestRecord], None]


class Dispatcher:
    """`builder`: the worker thread requests are built on ahead of time (None: each when it is due, as
    virtual time needs), at most `max_ahead` of them and `horizon_ns` of schedule ahead."""

    def __init__(self, backend: Backend, clock: Clock, sink: Sink, builder: Executor | None = None,
                 max_ahead: int = DEFAULT_MAX_AHEAD, horizon_ns: int = DEFAULT_HORIZON_NS, *,
                 keep_records: bool = True, told: Callable[[int], None] | None = None) -> None:
        self.backend = backend
        self.clock = clock
        self.sink = sink
        self.builder = builder
        self.max_ahead = max_ahead
        self.horizon_ns = horizon_ns
        self.stopping = False
        self._sender: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[RequestRecord]] = set()
        self._records: list[RequestRecord] = []
        # False: each load model returns no records, the sink alone keeps them (a long run's memory is its).
        self.keep_records = keep_records
        self.launched = 0  # requests handed to the backend this phase
        # Told how many of this phase's requests have gone (handed to their connection, or ended unsent) as
        # each goes, before the bytes are written: a shard's relay, whose parent, losing it, then counts what
        # was in flight as the endpoint saw it (told at launch, a request could wait on a busy loop for
        # milliseconds).
        self.told = told
        self._gone = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop sending now; requests in flight get the grace period of the running phase."""
        self.stopping = True
        if self._sender is not None:
            self._sender.cancel()

    def _feed(self, build: Callable[[int], RequestSpec], count: int | None,
              offsets_ns: Sequence[int] | None = None) -> Lookahead:
        def ready(i: int) -> RequestSpec:
            spec = build(i)
            self.backend.prepare(spec)
            return spec

        return Lookahead(ready, count, self.builder, offsets_ns, self.max_ahead, self.horizon_ns)

    async def _phase(self, sender: Coroutine[Any, Any, None], grace_s: float, feed: Lookahead | None = None
                     ) -> list[RequestRecord]:
        self._records = []
        self.launched = self._gone = 0
        self._sender = asyncio.ensure_future(sender)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            if not self.stopping:
                await self._wait_in_flight(None)
            else:
                await self._wait_in_flight(grace_s)
        except asyncio.CancelledError:
            await self._cancel_in_flight()
            raise
        finally:
            self._sender = None
            if feed is not None:
                feed.close()
        await self._cancel_in_flight()
        return sorted(self._records, key=lambda r: r.index)

    async def _wait_in_flight(self, timeout_s: float | None) -> None:
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=timeout_s)

    async def _cancel_in_flight(self) -> None:
        tasks = set(self._in_flight)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    @property
    def in_flight(self) -> set[asyncio.Task[RequestRecord]]:
        return self._in_flight

    def launch(self, spec: RequestSpec, intended_ns: int, answer: list[str] | None = None, held_ns: int = 0
               ) -> asyncio.Task[RequestRecord]:
        """The request handed to the backend now, as a task the phase tracks until it ends."""
        self.launched += 1
        task = asyncio.ensure_future(self._one(spec, intended_ns, answer, held_ns))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        return task

    async def _one(self, spec: RequestSpec, intended_ns: int, answer: list[str] | None,
                   held_ns: int) -> RequestRecord:
        return await run_request(self.backend, self.clock, spec, intended_ns, self._finished, answer, held_ns,
                                 None if self.told is None else self._went)

    def _went(self) -> None:
        assert self.told is not None
        self._gone += 1
        self.told(self._gone)

    def _finished(self, rec: RequestRecord) -> None:
        if rec.sent_ns is None and self.told is not None:
            self._went()  # it ended before any byte of it left (refused, cancelled): gone all the same
        if self.keep_records:
            self._records.append(rec)
        self.sink(rec)

    # -- load models ---------------------------------------------------------------------------

    async def open_loop(self, specs: Sequence[RequestSpec], offsets_ns: Sequence[int],
                        max_in_flight: int | None = None, grace_s: float = 30.0) -> list[RequestRecord]:
        if len(specs) != len(offsets_ns):
            raise ValueError(f"{len(specs)} requests for {len(offsets_ns)} arrivals")
        feed = self._feed(specs.__getitem__, len(specs), offsets_ns)
        return await self._phase(arrivals.pace(self, feed, offsets_ns, max_in_flight), grace_s, feed)

    async def fixed_batch(self, batches: Sequence[Sequence[RequestSpec]], grace_s: float = 30.0,
                          barrier: Barrier | None = None) -> list[RequestRecord]:
        """`barrier`: awaited before batch k ≥ 1 (a sharded run's, across its shards)."""
        return await self._phase(batch_pacer.pace(self, batches, barrier), grace_s)

    async def closed_loop(self, build: Callable[[int], RequestSpec], count: int | None, concurrency: int,
                          think_ns: int = 0, duration_ns: int | None = None, grace_s: float = 30.0,
                          stagger_ns: int = 0) -> list[RequestRecord]:
        """`count` requests (None: until `duration_ns` ends), request i being `build(i)`."""
        feed = self._feed(build, count)
        return await self._phase(users.pace(self, feed, concurrency, think_ns, duration_ns, stagger_ns),
                                 grace_s, feed)

    async def sessions(self, source: ConversationSource, offsets_ns: Sequence[int], grace_s: float = 30.0,
                       conversations: Sequence[int] | None = None) -> list[RequestRecord]:
        """Conversations arriving open-loop at `offsets_ns`; within each, a turn leaves when the previous
        answer has ended plus a think time, carrying the real answers as history. `conversations`: which one
        each arrival starts (a shard's share; default 0, 1, 2, …)."""
        which = range(len(offsets_ns)) if conversations is None else conversations
        return await self._phase(talks.pace(self, source, offsets_ns, which), grace_s)
