"""Requests built ahead: never more than the bound, and the very same requests as built when due."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.client.fake import ScriptedBackend
from harness.clock import NS_PER_MS, FakeClock
from harness.config.workload import Workload
from harness.run.dispatch import Dispatcher
from harness.run.lookahead import Lookahead
from harness.workload.requests import RequestSource, RequestSpec

WORKLOAD = Workload(prompt_tokens={"dist": "uniform", "min": 1, "max": 300},  # type: ignore[arg-type]
                    output_tokens={"dist": "uniform", "min": 1, "max": 50})  # type: ignore[arg-type]


def source(seed: int = 3) -> RequestSource:
    return RequestSource(WORKLOAD, "p", 0, seed, "run")


async def drive_threaded(clock: FakeClock, task: asyncio.Future[object]) -> None:
    """Virtual time for the dispatcher, real time for the building thread: a step of each in turn."""
    while not task.done():
        await asyncio.sleep(0.002)
        with contextlib.suppress(RuntimeError):  # nothing asleep on the clock while a build is awaited
            await clock.run_until_idle(task, max_steps=1)


async def drain(ahead: Lookahead, check: object = None) -> list[RequestSpec]:
    out = []
    while (spec := await ahead.next()) is not None:
        out.append(spec)
        if callable(check):
            check()
    return out


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 120), max_ahead=st.integers(1, 16), horizon_ms=st.integers(0, 50),
       gaps_ms=st.lists(st.integers(0, 20), min_size=120, max_size=120), pause_every=st.integers(1, 7))
def test_the_lookahead_never_holds_more_than_its_bounds(count: int, max_ahead: int, horizon_ms: int,
                                                        gaps_ms: list[int], pause_every: int) -> None:
    offsets = np.cumsum(gaps_ms[:count]) * NS_PER_MS
    horizon = horizon_ms * NS_PER_MS
    built: list[int] = []
    lock = threading.Lock()

    def build(i: int) -> RequestSpec:
        with lock:
            built.append(i)
        return source().spec(i)

    async def main() -> list[RequestSpec]:
        with ThreadPoolExecutor(1) as pool:
            ahead = Lookahead(build, count, pool, offsets.tolist(), max_ahead, horizon)
            out = []
            while (spec := await ahead.next(wait_s=5.0)) is not None:  # a worker given time: nothing built twice
                out.append(spec)
                h = ahead.handed_out
                assert ahead.held <= max_ahead
                assert ahead.submitted - h <= max_ahead
                last = ahead.submitted - 1
                if h < count and last > h:  # what is built beyond the next is within the horizon of it
                    assert offsets[last] - offsets[h] <= horizon
                if len(out) % pause_every == 0:
                    await asyncio.sleep(0.0005)  # let the builder run ahead as far as it may
            assert ahead.peak_held <= max_ahead
            return out

    out = asyncio.run(main())
    assert [s.index for s in out] == list(range(count))
    assert sorted(built) == list(range(count))  # each built once


async def test_requests_are_the_same_with_and_without_the_lookahead() -> None:
    with ThreadPoolExecutor(1) as pool:
        ahead = await drain(Lookahead(source().spec, 200, pool, max_ahead=8))
    inline = await drain(Lookahead(source().spec, 200))
    assert ahead == inline == source().take(200)
    assert len({s.prompt for s in ahead}) == 200


async def test_an_open_loop_phase_sends_the_same_requests_with_and_without_the_lookahead() -> None:
    seen: dict[str, list[tuple[str, str, int, int]]] = {}
    for name, pool in (("inline", None), ("ahead", ThreadPoolExecutor(1))):
        clock = FakeClock()
        backend = ScriptedBackend(clock, ttft_ms=5, itl_ms=1)
        sent: list[tuple[str, str, int, int]] = []
        execute = backend.execute

        async def recording(spec, events, execute=execute, sent=sent):  # type: ignore[no-untyped-def]
            sent.append((spec.request_id, spec.prompt, spec.prompt_tokens, spec.max_tokens))
            await execute(spec, events)

        backend.execute = recording  # type: ignore[method-assign]
        dispatcher = Dispatcher(backend, clock, lambda r: None, pool, max_ahead=4)
        offsets = [i * 10 * NS_PER_MS for i in range(40)]
        task = asyncio.ensure_future(dispatcher.open_loop(source().lazy(40), offsets))
        await drive_threaded(clock, task)
        records = task.result()
        assert [r.status for r in records] == ["ok"] * 40
        assert sorted(backend.prepared) == sorted(r.request_id for r in records)
        seen[name] = sent
        if pool is not None:
            pool.shutdown()
    assert seen["ahead"] == seen["inline"] and len(seen["inline"]) == 40


async def test_closed_loop_users_share_one_feed_each_request_once() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=3, itl_ms=1)
    with ThreadPoolExecutor(1) as pool:
        dispatcher = Dispatcher(backend, clock, lambda r: None, pool, max_ahead=3)
        task = asyncio.ensure_future(dispatcher.closed_loop(source().spec, 50, 8))
        await drive_threaded(clock, task)
    records = task.result()
    assert sorted(r.index for r in records) == list(range(50))


class Starved(ThreadPoolExecutor):
    """A worker that never gets a CPU (its idle priority, on a core other processes keep busy)."""

    def __init__(self) -> None:
        super().__init__(1)
        self.gate = threading.Event()

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        def held():  # type: ignore[no-untyped-def]
            self.gate.wait()
            return fn(*args, **kwargs)
        return super().submit(held)


async def test_a_starved_worker_never_stalls_the_phase() -> None:
    """Its requests are built on the loop's thread when due (a CPU hog once froze a phase until the hog ended)."""
    pool = Starved()
    try:
        ahead = Lookahead(source().spec, 40, pool, max_ahead=8)
        got = await asyncio.wait_for(drain(ahead), timeout=10)
        assert [s.request_id for s in got] == [source().spec(i).request_id for i in range(40)]
        assert ahead.built_here == 40
        # Given until its request is due, a late worker is waited for: nothing is built twice.
        pool.gate.set()
        again = Lookahead(source().spec, 40, ThreadPoolExecutor(1), max_ahead=8)
        while (spec := await again.next(wait_s=5.0)) is not None:
            assert spec.request_id == source().spec(again.handed_out - 1).request_id
        assert again.built_here == 0
    finally:
        pool.gate.set()
        pool.shutdown()


async def test_what_was_built_here_is_not_built_again_by_the_worker_when_it_wakes() -> None:
    """A worker starved while the loop's thread built every request (a closed loop on a busy pinned core) skips
    those once it runs, rather than spend the same CPU twice."""
    built: list[int] = []

    def counted(i: int) -> RequestSpec:
        built.append(i)
        return source().spec(i)

    pool = Starved()
    try:
        ahead = Lookahead(counted, 40, pool, max_ahead=8)
        got = await asyncio.wait_for(drain(ahead), timeout=10)
        assert len(got) == 40 and ahead.built_here == 40
    finally:
        pool.gate.set()
        pool.shutdown(wait=True)  # every job the worker was given has now run
    assert sorted(built) == list(range(40))  # each once
