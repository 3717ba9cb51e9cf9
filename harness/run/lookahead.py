"""Requests built before their time, off the event loop.

Building a request (its prompt, its body bytes) takes from a tenth of a millisecond (the shared words)
to milliseconds (a real tokenizer, thousands of tokens). Built just before its deadline, a request
leaves late and bunches the next ones: the arrival process the server sees is no longer the one
planned. A `Lookahead` hands out a phase's requests in order, each built earlier on one worker
thread, never more than `max_ahead` requests past the one handed out last nor, on a schedule, more than
`horizon_ns` of schedule ahead of it: memory stays bounded however long the phase or trace.

Without an executor (virtual time, where a thread's progress cannot be reasoned about) each request is
built when it is asked for: the same requests, in the same order, as a function of their index alone.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future

from harness.clock import NS_PER_S
from harness.workload.requests import RequestSpec

DEFAULT_MAX_AHEAD = 256
DEFAULT_HORIZON_NS = 2 * NS_PER_S
CHUNK = 16  # requests a job of the worker builds: one hand-over between the threads per chunk, not per request
PRIME_WAIT_S = 2.0


class Lookahead:
    def __init__(self, build: Callable[[int], RequestSpec], count: int | None, executor: Executor | None = None,
                 offsets_ns: Sequence[int] | None = None, max_ahead: int = DEFAULT_MAX_AHEAD,
                 horizon_ns: int = DEFAULT_HORIZON_NS) -> None:
        self._build = build
        self._count = count
        self._executor = executor
        self._offsets = offsets_ns
        self._max_ahead = max(1, max_ahead)
        self._chunk = min(CHUNK, self._max_ahead)
        self._horizon_ns = horizon_ns
        # Jobs given to the worker, oldest first: (first request, one past the last, their specs to come).
        # Plain executor futures, wrapped for asyncio only when awaited: run_in_executor's chained pair per
        # job is a reference cycle, and the timing-tuned collector (harness.gctune) never frees old cycles
        # mid-run.
        self._jobs: deque[tuple[int, int, Future[list[RequestSpec | None]]]] = deque()
        self._submitted = 0  # requests given to the worker so far
        self.handed_out = 0
        self.peak_held = 0  # most requests built or being built at once
        self.built_here = 0  # requests the worker had not built in time, built on the caller's thread
        self._built_here_to = 0  # one past the last of them: the worker skips those

    @property
    def held(self) -> int:
        """Requests built or being built and not handed out yet."""
        return self._submitted - self.handed_out if self._jobs else 0

    @property
    def submitted(self) -> int:
        return self._submitted

    def _more(self, i: int) -> bool:
        return self._count is None or i < self._count

    def _in_horizon(self, i: int) -> bool:
        offsets = self._offsets
        if offsets is None or i == self.handed_out:
            return True
        return offsets[i] - offsets[self.handed_out] <= self._horizon_ns

    def _room(self, i: int) -> bool:
        return i - self.handed_out < self._max_ahead and self._more(i) and self._in_horizon(i)

    def _build_range(self, first: int, stop: int) -> list[RequestSpec | None]:
        # One handed out already was built on the caller's thread (this worker was behind): not built twice.
        return [self._build(i) if i >= self._built_here_to else None for i in range(first, stop)]

    def _submit(self, first: int, stop: int) -> None:
        assert self._executor is not None
        job = self._executor.submit(self._build_range, first, stop)
        self._jobs.append((first, stop, job))
        self._submitted = stop

    def _fill(self, force: bool = False) -> None:
        """Top up by whole chunks once a chunk's room is free (or at once with `force`)."""
        if not force and self.held > self._max_ahead - self._chunk:
            return
        while self._room(self._submitted):
            first, stop = self._submitted, self._submitted + 1
            while stop - first < self._chunk and self._room(stop):
                stop += 1
            if stop - first < self._chunk and not force and self._more(stop) and not self._soon(first):
                break  # the horizon, not the bound, cut the chunk: wait for a whole one unless this is due soon
            self._submit(first, stop)
        self.peak_held = max(self.peak_held, self.held)

    def _soon(self, i: int) -> bool:
        """Request i is due within half the horizon of the one handed out last."""
        offsets = self._offsets
        return offsets is None or offsets[i] - offsets[self.handed_out] <= self._horizon_ns // 2

    async def prime(self, count: int) -> None:
        """Have the first `count` requests (at most the bound) built before the phase's clock starts: the
        users of a closed loop, or a burst at the start of a schedule, all want theirs at once."""
        if self._executor is None or self.handed_out:
            return
        self._fill(force=True)
        jobs = [job for first, _, job in self._jobs if first < count]
        if jobs:  # bounded: a worker starved of CPU must not hold the phase back (`next` builds what it lacks)
            await asyncio.wait([_awaitable(job) for job in jobs], timeout=PRIME_WAIT_S)

    async def next(self, wait_s: float = 0.0) -> RequestSpec | None:
        """The next request, or None when the phase has no more. Callers may wait on it concurrently (the
        users of a closed loop): each gets its own request, in order. `wait_s`: how long the caller can wait
        for the worker (until the request is due) before it is built here instead."""
        i = self.handed_out
        if not self._more(i):
            return None
        if self._executor is None:
            self.handed_out = i + 1
            return self._build(i)
        if not self._jobs:  # nothing built ahead: this one now
            self._submit(i, i + 1)
        first, stop, job = self._jobs[0]
        self.handed_out = i + 1
        if self.handed_out == stop:
            self._jobs.popleft()
        self._fill()  # the worker never idles while there is room
        if not job.done() and wait_s > 0:
            await asyncio.wait((_awaitable(job),), timeout=wait_s)
        if job.done() and (spec := job.result()[i - first]) is not None:
            return spec
        # The worker is behind: it runs at idle priority, and a CPU kept busy by other processes can starve it
        # for as long as they run. This request is due: build it here rather than wait (the worker's copy, the
        # same spec, is dropped).
        self.built_here += 1
        self._built_here_to = i + 1
        return self._build(i)

    def close(self) -> None:
        """Drop what was built ahead and not handed out (the phase ended or was stopped)."""
        for _, _, job in self._jobs:
            job.cancel()
        self._jobs.clear()


def _awaitable(job: Future[list[RequestSpec | None]]) -> asyncio.Future[None]:
    """An asyncio future done when `job` is: the job's callback refers to it and nothing refers back (no
    cycle, unlike asyncio.wrap_future's pair)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def finished(_: Future[list[RequestSpec | None]]) -> None:
        loop.call_soon_threadsafe(_settle, done)

    job.add_done_callback(finished)
    return done


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)
