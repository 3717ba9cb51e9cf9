"""The dispatcher in virtual time: exact intended times, batches, closed loop, failures as data."""

import asyncio

import pytest

from harness.clock import NS_PER_MS, FakeClock
from harness.dispatch import Dispatcher
from harness.records import RequestRecord
from harness.scenario import Workload
from harness.workload import build_requests

from .fakes import ScriptedBackend

MS = NS_PER_MS


def specs(n: int, out: int = 4, batch: int | None = None):
    return build_requests(Workload(prompt_tokens=8, output_tokens=out), "p", 0, n, seed=1, run_id="t",
                          batch_size=batch)


async def drive(clock: FakeClock, coro):
    task = asyncio.ensure_future(coro)
    await clock.run_until_idle(task)
    return task.result()


async def test_open_loop_sends_at_absolute_offsets_and_does_not_wait_for_replies() -> None:
    clock = FakeClock(start_ns=1_000 * MS)
    backend = ScriptedBackend(clock, ttft_ms=500, itl_ms=10)
    seen: list[RequestRecord] = []
    offsets = [0, 10 * MS, 15 * MS, 200 * MS]
    records = await drive(clock, Dispatcher(backend, clock, seen.append).open_loop(specs(4), offsets))
    assert [r.intended_ns - 1_000 * MS for r in records] == offsets
    assert all(r.sent_ns == r.intended_ns for r in records)  # zero lag in virtual time
    assert backend.peak_in_flight == 4  # open loop: a slow server does not slow the arrivals
    assert [r.first_token_ns - r.intended_ns for r in records] == [500 * MS] * 4
    assert len(seen) == 4  # every record reached the sink


async def test_fixed_batch_sends_together_and_waits_for_the_slowest() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=100, itl_ms=10)
    s = specs(6, out=5, batch=3)
    batches = [s[:3], s[3:]]
    records = await drive(clock, Dispatcher(backend, clock, lambda r: None).fixed_batch(batches))
    first, second = records[:3], records[3:]
    assert {r.intended_ns for r in first} == {0}
    # The second batch starts when the first has fully finished: 100 ms + 4 gaps of 10 ms.
    assert {r.intended_ns for r in second} == {140 * MS}
    assert [r.batch for r in records] == [0, 0, 0, 1, 1, 1]
    assert backend.peak_in_flight == 3
    assert backend.prepared[:3] == [x.request_id for x in s[:3]]


async def test_closed_loop_keeps_concurrency_and_intends_when_a_user_is_free() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=20, itl_ms=10)
    records = await drive(clock, Dispatcher(backend, clock, lambda r: None).closed_loop(specs(10, out=3), 2,
                                                                                      think_ns=5 * MS))
    assert backend.peak_in_flight == 2
    assert len(records) == 10 and sorted(r.index for r in records) == list(range(10))
    # Each user: 40 ms per request plus 5 ms think time.
    assert sorted(r.intended_ns for r in records)[-1] == 4 * 45 * MS


async def test_failures_are_records_not_exceptions() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, fail={1: ("http_error", "HTTP 503 server_error"), 2: ("timeout", "t")})
    seen: list[RequestRecord] = []
    records = await drive(clock, Dispatcher(backend, clock, seen.append).open_loop(specs(4), [0, 1, 2, 3]))
    assert [r.status for r in records] == ["ok", "http_error", "timeout", "ok"]
    assert len(seen) == 4


async def test_cancelling_a_run_records_in_flight_requests_as_cancelled() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=1000)
    seen: list[RequestRecord] = []
    task = asyncio.ensure_future(Dispatcher(backend, clock, seen.append).open_loop(specs(3), [0, 0, 0]))
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.status for r in seen] == ["cancelled"] * 3
    assert all(r.reason == "run stopped" for r in seen)
