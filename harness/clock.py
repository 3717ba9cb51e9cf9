"""One monotonic clock in integer nanoseconds, and a virtual one for tests.

Every timestamp the harness records comes from a `Clock`, so the dispatcher can be
tested in virtual time and no code reads the real clock behind its back.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from typing import Any, Protocol

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000

# Event-loop timers wake on epoll's 1 ms granularity; the last stretch before a deadline is
# covered by yielding to the loop instead, which keeps schedule lag well under a millisecond.
_SPIN_NS = 1_500_000


async def cancel_quietly(task: asyncio.Task[None] | None) -> None:
    """Stop a background loop (ticker, driver) and wait until it has."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Clock(Protocol):
    def now_ns(self) -> int: ...

    async def sleep_until(self, deadline_ns: int) -> None: ...


class MonotonicClock:
    """`time.monotonic_ns`, which is system-wide on Linux: the simulator shares it.

    `nap_ns`: sleep in naps no longer than this. uvloop (libuv) computes its poll's timeout from the time it
    cached when the loop iteration began, so callbacks that ran for X ms in that iteration make a timer fire
    up to X ms late — as late as the timer was set ahead. The simulator's steps, which a burst of requests
    parsed in one iteration made 5–15 ms late, wake within a nap of their deadline instead."""

    now_ns = staticmethod(time.monotonic_ns)  # the builtin itself: no Python frame on a token's path

    def __init__(self, nap_ns: int | None = None, spin_ns: int = _SPIN_NS) -> None:
        self._nap_s = nap_ns / NS_PER_S if nap_ns is not None else None
        self._spin_ns = spin_ns

    async def sleep_until(self, deadline_ns: int) -> None:
        remaining = deadline_ns - time.monotonic_ns()
        spin = self._spin_ns
        if remaining > spin:
            if self._nap_s is None:
                await asyncio.sleep((remaining - spin) / NS_PER_S)
            else:
                while remaining > spin:
                    await asyncio.sleep(min((remaining - spin) / NS_PER_S, self._nap_s))
                    remaining = deadline_ns - time.monotonic_ns()
        while time.monotonic_ns() < deadline_ns:
            await asyncio.sleep(0)


class FakeClock:
    """Virtual time: `sleep_until` parks the caller until `advance` passes its deadline.

    `run_until_idle` advances straight to the next deadline whenever every task is parked,
    so a whole dispatcher run completes instantly and deterministically.
    """

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        # (deadline, 0 for an ordinary sleeper or 1 for one that waits for the end of its instant, seq,
        # future)
        self._sleepers: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now_ns(self) -> int:
        return self._now

    async def sleep_until(self, deadline_ns: int) -> None:
        if deadline_ns <= self._now:
            await asyncio.sleep(0)
            return
        await self._park(deadline_ns, 0)

    async def sleep(self, duration_ns: int) -> None:
        await self.sleep_until(self._now + duration_ns)

    async def end_of_instant(self) -> None:
        """Wait until every task that can run at this instant has run and parked (or ended)."""
        await self._park(self._now, 1)

    async def _park(self, deadline_ns: int, late: int) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline_ns, late, next(self._seq), fut))
        await fut

    def advance_to(self, t_ns: int) -> None:
        self._wake_through((t_ns, 1))

    def _wake_through(self, key: tuple[int, int]) -> None:
        self._now = max(self._now, key[0])
        while self._sleepers and self._sleepers[0][:2] <= key:
            fut = heapq.heappop(self._sleepers)[3]
            if not fut.done():
                fut.set_result(None)

    async def run_until_idle(self, task: asyncio.Future[Any], max_steps: int = 1_000_000) -> None:
        """Drive virtual time until `task` finishes, waking the next sleepers whenever all are parked."""
        for _ in range(max_steps):
            for _ in range(20):  # let every runnable task reach its next await
                await asyncio.sleep(0)
            if task.done():
                return
            if not self._sleepers:
                raise RuntimeError("deadlock: task pending and nothing asleep on the fake clock")
            self._wake_through(self._sleepers[0][:2])
        raise RuntimeError("fake clock: step limit reached")
