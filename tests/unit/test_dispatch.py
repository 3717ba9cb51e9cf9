"""The dispatcher in virtual time: exact intended times, batches, closed loop, failures as data."""

import asyncio
from typing import Any

import pytest

from harness.client.fake import ScriptedBackend
from harness.clock import NS_PER_MS, FakeClock
from harness.config.workload import Workload
from harness.records import RequestRecord
from harness.run.dispatch import Dispatcher
from harness.stats.metrics import client_late_ns
from tests.helpers import build_requests

MS = NS_PER_MS


def specs(n: int, out: int = 4, batch: int | None = None):
    return build_requests(Workload(prompt_tokens=8, output_tokens=out), "p", 0, n, seed=1, run_id="t",
                          batch_size=batch)


async def drive(clock: FakeClock, coro):
    task = asyncio.ensure_future(coro)
    await clock.run_until_idle(task)
    return task.result()



async def run_stopping_at(clock: FakeClock, dispatcher: Dispatcher, task: asyncio.Future[Any], t_ns: int) -> None:
    """Run the phase in virtual time, calling `stop()` at t_ns."""
    async def stop() -> None:
        await clock.sleep_until(t_ns)
        dispatcher.stop()

    stopper = asyncio.ensure_future(stop())
    await clock.run_until_idle(task)
    await stopper

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
    records = await drive(clock, Dispatcher(backend, clock, lambda r: None).closed_loop(specs(10, out=3).__getitem__,
                                                                                      10, 2, think_ns=5 * MS))
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


async def test_in_flight_cap_holds_requests_back_and_the_wait_shows_as_lag() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=100, itl_ms=0)  # each request takes 100 ms
    offsets = [i * 10 * MS for i in range(6)]  # one every 10 ms
    records = await drive(clock, Dispatcher(backend, clock, lambda r: None).open_loop(
        specs(6, out=1), offsets, max_in_flight=2))
    assert backend.peak_in_flight == 2
    lags = [(r.sent_ns - r.intended_ns) // MS for r in records]
    # 0 and 1 go on time; 2 (due at 20 ms) waits for 0 to end at 100 ms, 3 (due 30) for 1 at 110,
    # 4 (due 40) for 2 at 200, 5 (due 50) for 3 at 210.
    assert lags == [0, 0, 80, 80, 160, 160]
    # All of it the cap's doing: held by design, none of it the client's own lateness.
    assert [r.held_ns // MS for r in records] == lags
    assert [client_late_ns(r) for r in records] == [0] * 6


async def test_stop_ends_sending_and_lets_requests_in_flight_finish() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=300, itl_ms=10)
    dispatcher = Dispatcher(backend, clock, lambda r: None)
    offsets = [i * 100 * MS for i in range(10)]
    task = asyncio.ensure_future(dispatcher.open_loop(specs(10, out=2), offsets, grace_s=5))
    await run_stopping_at(clock, dispatcher, task, 250 * MS)
    records = task.result()
    assert [r.index for r in records] == [0, 1, 2]  # nothing sent after the stop
    assert [r.status for r in records] == ["ok"] * 3  # in flight at the stop: finished within the grace


async def test_stop_with_no_grace_cancels_requests_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=300, itl_ms=10)
    seen: list[RequestRecord] = []
    dispatcher = Dispatcher(backend, clock, seen.append)
    task = asyncio.ensure_future(dispatcher.open_loop(specs(4, out=2), [0, 0, 0, 10**12], grace_s=0))
    for _ in range(50):
        await asyncio.sleep(0)
    dispatcher.stop()
    records = await asyncio.wait_for(task, 5)
    assert [r.status for r in records] == ["cancelled"] * 3
    assert len(seen) == 3 and all(r.reason == "run stopped" for r in seen)


async def test_stopping_a_batch_phase_finishes_the_batch_but_starts_no_other() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=100, itl_ms=10)
    dispatcher = Dispatcher(backend, clock, lambda r: None)
    s = specs(6, out=3, batch=3)
    task = asyncio.ensure_future(dispatcher.fixed_batch([s[:3], s[3:]], grace_s=10))
    await run_stopping_at(clock, dispatcher, task, 50 * MS)  # mid-batch
    assert [(r.batch, r.status) for r in task.result()] == [(0, "ok")] * 3


async def test_closed_loop_stops_starting_requests_at_its_duration() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, ttft_ms=50, itl_ms=0)
    source = specs(1000, out=1)
    records = await drive(clock, Dispatcher(backend, clock, lambda r: None).closed_loop(
        source.__getitem__, None, 2, duration_ns=1000 * MS))
    # Two users, 50 ms per request, new requests until t = 1 s: 20 each.
    assert len(records) == 40
    assert max(r.intended_ns for r in records) < 1000 * MS


async def test_each_request_is_told_as_it_goes_and_an_unsent_one_as_it_ends() -> None:
    """A shard's parent counts a killed shard's requests in flight from what it was told: a count for each
    request as the backend hands it to its connection (a retry is not another), and for one that ended before
    any byte left, so that every ended request is among those counted."""
    clock = FakeClock()
    told: list[int] = []
    heard: list[tuple[str, int]] = []

    class Watching(ScriptedBackend):
        async def execute(self, spec: Any, events: Any) -> None:
            if spec.index == 4:  # refused before it was written
                events.failed("transport_error", "ConnectionRefusedError")
                return
            heard.append(("before", len(told)))
            await super().execute(spec, events)
            events.sent()  # as a retry stamps it again
            heard.append(("after", len(told)))

    dispatcher = Dispatcher(Watching(clock, ttft_ms=10, itl_ms=1), clock, lambda r: None, told=told.append)
    s = specs(6, batch=3)
    records = await drive(clock, dispatcher.fixed_batch([s[:3], s[3:]]))
    assert told == [1, 2, 3, 4, 5, 6]  # the phase's count, once per request, the refused one included
    assert [r.status for r in records].count("ok") == 5
    # A request's own count was said while it was handed over (ScriptedBackend stamps `sent` as it starts).
    befores = [n for when, n in heard if when == "before"]
    afters = [n for when, n in heard if when == "after"]
    assert all(a > b for b, a in zip(befores, afters, strict=True)), heard
