"""The dispatcher: when each request is sent, and how a phase stops.

Open loop sleeps to absolute deadlines (start + intended offset), never "a gap after the last
send", which drifts and under-delivers the rate; an optional in-flight cap holds requests back,
and the wait shows as schedule lag, never silently. Fixed batch sends B at once and waits for
all. Closed loop starts a user's next request when its last one ends.

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
from harness.clock import NS_PER_S, Clock
from harness.records import RequestRecord
from harness.run.lookahead import DEFAULT_HORIZON_NS, DEFAULT_MAX_AHEAD, Lookahead
from harness.run.worker import run_request
from harness.workload.datasets import Message
from harness.workload.requests import RequestSpec
from harness.workload.sessions import ConversationSource

Sink = Callable[[RequestRecord], None]
Barrier = Callable[[int], Coroutine[Any, Any, None]]  # before batch k ≥ 1 of a fixed-batch phase
_BUILD_MARGIN_S = 0.001  # what building a request here, when the worker is late, may take


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

    def _launch(self, spec: RequestSpec, intended_ns: int, answer: list[str] | None = None, held_ns: int = 0
                ) -> asyncio.Task[RequestRecord]:
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
        return await self._phase(self._send_open_loop(feed, offsets_ns, max_in_flight), grace_s, feed)

    async def _send_open_loop(self, feed: Lookahead, offsets_ns: Sequence[int], max_in_flight: int | None) -> None:
        await feed.prime(self.max_ahead)  # the first requests are ready before the schedule starts
        spec = await feed.next()
        start = self.clock.now_ns()
        released = start  # when the in-flight cap last let a held request go
        for k, offset in enumerate(offsets_ns):
            deadline = start + int(offset)
            if k:  # the worker has until this request is due (less a build's worth) to have it ready
                spec = await feed.next(max(0.0, (deadline - self.clock.now_ns()) / NS_PER_S - _BUILD_MARGIN_S))
            assert spec is not None
            await self.clock.sleep_until(deadline)
            # The cap's doing, not the client's lateness: the wait for a free slot, and the time this
            # request's turn came while the sender was still held for an earlier one. Only waking later than
            # that is late.
            woke = self.clock.now_ns()
            late = max(0, woke - max(deadline, released))
            if max_in_flight is not None and len(self._in_flight) >= max_in_flight:
                while len(self._in_flight) >= max_in_flight:
                    await asyncio.wait(set(self._in_flight), return_when=asyncio.FIRST_COMPLETED)
                released = self.clock.now_ns()
            self._launch(spec, deadline, held_ns=max(0, self.clock.now_ns() - deadline - late))

    async def fixed_batch(self, batches: Sequence[Sequence[RequestSpec]], grace_s: float = 30.0,
                          barrier: Barrier | None = None) -> list[RequestRecord]:
        """`barrier`: awaited before batch k ≥ 1 (a sharded run's, across its shards)."""
        return await self._phase(self._send_batches(batches, barrier), grace_s)

    async def _send_batches(self, batches: Sequence[Sequence[RequestSpec]], barrier: Barrier | None) -> None:
        for k, batch in enumerate(batches):
            if k and barrier is not None:
                await barrier(k)  # a sharded run's barrier: every shard's share of k−1 has ended
            for spec in batch:
                self.backend.prepare(spec)
            intended = self.clock.now_ns()
            tasks = {self._launch(spec, intended) for spec in batch}
            if tasks:  # a shard's share of a small batch may be empty; it keeps the barrier all the same
                await asyncio.wait(tasks)  # not gather: stopping the sender must not cancel the batch

    async def closed_loop(self, build: Callable[[int], RequestSpec], count: int | None, concurrency: int,
                          think_ns: int = 0, duration_ns: int | None = None, grace_s: float = 30.0,
                          stagger_ns: int = 0) -> list[RequestRecord]:
        """`count` requests (None: until `duration_ns` ends), request i being `build(i)`."""
        feed = self._feed(build, count)
        return await self._phase(self._send_closed_loop(feed, concurrency, think_ns, duration_ns, stagger_ns),
                                 grace_s, feed)

    async def _send_closed_loop(self, feed: Lookahead, concurrency: int, think_ns: int,
                                duration_ns: int | None, stagger_ns: int) -> None:
        await feed.prime(concurrency)  # every user's first request is ready before the phase's clock starts
        start = self.clock.now_ns()
        end = None if duration_ns is None else start + duration_ns

        async def user(i: int) -> None:
            if stagger_ns:
                await self.clock.sleep_until(start + stagger_ns * i // concurrency)
            while True:
                now = self.clock.now_ns()  # the user's turn: what keeps the request from leaving now is lag
                if end is not None and now >= end:
                    return
                spec = await feed.next()  # the shared feed hands each request to exactly one user
                if spec is None:
                    return
                await asyncio.wait({self._launch(spec, now)})
                if think_ns:
                    await self.clock.sleep_until(self.clock.now_ns() + think_ns)

        users = [asyncio.ensure_future(user(i)) for i in range(concurrency)]
        try:
            await asyncio.gather(*users)
        finally:
            for u in users:
                u.cancel()

    async def sessions(self, source: ConversationSource, offsets_ns: Sequence[int], grace_s: float = 30.0,
                       conversations: Sequence[int] | None = None) -> list[RequestRecord]:
        """Conversations arriving open-loop at `offsets_ns`; within each, a turn leaves when the previous
        answer has ended plus a think time, carrying the real answers as history. `conversations`: which one
        each arrival starts (a shard's share; default 0, 1, 2, …)."""
        which = range(len(offsets_ns)) if conversations is None else conversations
        return await self._phase(self._send_sessions(source, offsets_ns, which), grace_s)

    async def _send_sessions(self, source: ConversationSource, offsets_ns: Sequence[int],
                             conversations: Sequence[int]) -> None:
        start = self.clock.now_ns()
        talks: list[asyncio.Task[None]] = []
        try:
            for i, offset in zip(conversations, offsets_ns, strict=True):
                deadline = start + int(offset)
                await self.clock.sleep_until(deadline)
                talks.append(asyncio.ensure_future(self._conversation(source, i, deadline)))
            await asyncio.gather(*talks)
        finally:  # stopped: no further turn starts; turns in flight get the grace period
            for talk in talks:
                talk.cancel()

    async def _conversation(self, source: ConversationSource, i: int, arrival_ns: int) -> None:
        conv = source.conversation(i)
        history: tuple[Message, ...] = conv.opening
        intended = arrival_ns
        for k in range(len(conv.turns)):
            spec = source.spec(conv, k, history)
            self.backend.prepare(spec)
            await self.clock.sleep_until(intended)
            answer: list[str] = []
            task = self._launch(spec, intended, answer)
            await asyncio.wait({task})
            rec = task.result()
            if rec.status != "ok":  # no answer to build on: the user leaves
                return
            history = (*(spec.messages or ()), ("assistant", "".join(answer)))
            intended = rec.end_ns + source.think_ns(i, k + 1)

