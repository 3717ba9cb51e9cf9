"""Each pacer on its own, in virtual time, through a fake sender whose requests take a scripted time: when each
request leaves, and what it waits for (the dispatcher's lifecycle is tested in test_dispatch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from harness.clock import NS_PER_MS, FakeClock
from harness.records import RequestRecord
from harness.run.lookahead import Lookahead
from harness.run.pacers import arrivals, batches, conversations, users
from harness.workload.requests import RequestSpec

MS = NS_PER_MS


def spec(i: int, messages: tuple[tuple[str, str], ...] | None = None) -> RequestSpec:
    return RequestSpec(f"r{i}", "p", i, "x", 1, 4, False, messages=messages)


class _Prepared:
    def __init__(self) -> None:
        self.prepared: list[str] = []

    def prepare(self, s: RequestSpec) -> None:
        self.prepared.append(s.request_id)


@dataclass
class FakeSender:
    """Launches a request as a task that ends `takes_ms` later in virtual time (per request id, default 100)."""

    clock: FakeClock = field(default_factory=FakeClock)
    backend: _Prepared = field(default_factory=_Prepared)
    takes_ms: dict[str, int] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    sent: list[tuple[str, int, int]] = field(default_factory=list)  # (id, at, held)
    peak: int = 0
    _flying: set[asyncio.Task[RequestRecord]] = field(default_factory=set)

    @property
    def in_flight(self) -> set[asyncio.Task[RequestRecord]]:
        return self._flying

    def launch(self, s: RequestSpec, intended_ns: int, answer: list[str] | None = None, held_ns: int = 0
               ) -> asyncio.Task[RequestRecord]:
        self.sent.append((s.request_id, self.clock.now_ns(), held_ns))
        task = asyncio.ensure_future(self._one(s, intended_ns, answer))
        self._flying.add(task)
        task.add_done_callback(self._flying.discard)
        self.peak = max(self.peak, len(self._flying))
        return task

    async def _one(self, s: RequestSpec, intended_ns: int, answer: list[str] | None) -> RequestRecord:
        await self.clock.sleep_until(self.clock.now_ns() + self.takes_ms.get(s.request_id, 100) * MS)
        if answer is not None:
            answer.append(f"answer to {s.request_id}")
        status = "http_error" if s.request_id in self.failing else "ok"
        return RequestRecord(s.request_id, "p", s.index, 1, 4, intended_ns, end_ns=self.clock.now_ns(),
                             status=status)  # type: ignore[arg-type]


async def _run(sender: FakeSender, pacing: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(pacing)
    await sender.clock.run_until_idle(task)
    task.result()
    if sender.in_flight:
        await sender.clock.run_until_idle(asyncio.ensure_future(asyncio.wait(set(sender.in_flight))))


def _feed(n: int | None) -> Lookahead:
    return Lookahead(spec, n)


async def test_arrivals_leave_at_their_offsets_whatever_the_server_takes() -> None:
    sender = FakeSender(takes_ms={"r0": 1_000})
    await _run(sender, arrivals.pace(sender, _feed(3), [0, 10 * MS, 25 * MS], None))
    assert [(rid, at) for rid, at, _ in sender.sent] == [("r0", 0), ("r1", 10 * MS), ("r2", 25 * MS)]
    assert sender.peak == 3  # open loop: a slow answer holds nothing back


async def test_arrivals_past_the_cap_wait_and_the_wait_is_their_held_time() -> None:
    sender = FakeSender()  # each takes 100 ms
    await _run(sender, arrivals.pace(sender, _feed(3), [0, 10 * MS, 20 * MS], 2))
    assert sender.sent == [("r0", 0, 0), ("r1", 10 * MS, 0), ("r2", 100 * MS, 80 * MS)]  # held until r0 ended
    assert sender.peak == 2


async def test_a_batch_leaves_at_once_and_the_next_after_all_of_it_with_the_barrier_between() -> None:
    sender = FakeSender(takes_ms={"r1": 300})
    crossed: list[int] = []

    async def barrier(k: int) -> None:
        crossed.append(k)

    await _run(sender, batches.pace(sender, [[spec(0), spec(1)], [spec(2), spec(3)]], barrier))
    assert [at for _, at, _ in sender.sent] == [0, 0, 300 * MS, 300 * MS]  # the second after the slowest
    assert crossed == [1] and sender.backend.prepared == ["r0", "r1", "r2", "r3"]


async def test_users_keep_their_number_in_flight_and_each_sends_when_its_last_ended() -> None:
    sender = FakeSender(takes_ms={"r0": 50, "r1": 200})
    await _run(sender, users.pace(sender, _feed(5), 2, think_ns=10 * MS, duration_ns=None, stagger_ns=0))
    assert sender.peak == 2 and len(sender.sent) == 5
    at = {rid: t for rid, t, _ in sender.sent}
    assert at["r0"] == at["r1"] == 0 and at["r2"] == 60 * MS  # r0's user: 50 ms answer + 10 ms think


async def test_users_stop_when_their_duration_ends() -> None:
    sender = FakeSender()
    await _run(sender, users.pace(sender, _feed(None), 1, think_ns=0, duration_ns=250 * MS, stagger_ns=0))
    assert [at for _, at, _ in sender.sent] == [0, 100 * MS, 200 * MS]


@dataclass
class _Conv:
    opening: tuple[tuple[str, str], ...]
    turns: tuple[int, ...]


class FakeSource:
    """Conversation i of two turns; each turn's spec carries its history (the real answers so far)."""

    def __init__(self) -> None:
        self.histories: list[tuple[tuple[str, str], ...]] = []

    def conversation(self, i: int) -> _Conv:
        return _Conv((("system", f"conv {i}"),), (0, 1))

    def spec(self, conv: _Conv, k: int, history: tuple[tuple[str, str], ...]) -> RequestSpec:
        self.histories.append(history)
        return spec(10 * int(conv.opening[0][1].split()[1]) + k, messages=(*history, ("user", f"turn {k}")))

    def think_ns(self, i: int, k: int) -> int:
        return 5 * MS


async def test_a_conversations_turns_follow_their_answers_and_a_failed_turn_ends_it() -> None:
    sender = FakeSender(failing={"r10"})
    source = FakeSource()
    await _run(sender, conversations.pace(sender, source, [0, 20 * MS], [0, 1]))  # type: ignore[arg-type]
    at = {rid: t for rid, t, _ in sender.sent}
    assert at == {"r0": 0, "r1": 105 * MS, "r10": 20 * MS}  # r11 never: its first turn failed
    assert ("assistant", "answer to r0") in source.histories[-1]  # the real answer carried on
