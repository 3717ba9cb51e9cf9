"""The simulator's two stream shapes: a step's tokens in one write, or every event in its own."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from harness.clock import FakeClock
from harness.sim.engine import SimRequest
from harness.sim.realtime import FixedTimingDriver
from harness.sim.writes import StreamWrites


class _Transport(asyncio.WriteTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(frame), frame)


async def test_step_mode_writes_what_it_is_given_at_once() -> None:
    t, ended = _Transport(), []
    writes = StreamWrites(t, per_event=False, on_end=lambda: ended.append(True))
    writes.send([b"a", b"b"])
    writes.send([b"c", b"d"], last=True)
    assert t.writes == [_chunk(b"ab"), _chunk(b"cd")] and ended == [True]


async def test_token_mode_writes_one_event_per_turn_of_the_loop_and_ends_after_the_last() -> None:
    t, ended = _Transport(), []
    writes = StreamWrites(t, per_event=True, on_end=lambda: ended.append(True))
    writes.send([b"tok1", b"tok2"])
    writes.send([b"finish", b"[DONE]"], last=True)
    assert t.writes == [_chunk(b"tok1")]
    for n in (2, 3, 4):
        await asyncio.sleep(0)
        assert len(t.writes) == n
        assert ended == ([True] if n == 4 else [])
    assert t.writes == [_chunk(e) for e in (b"tok1", b"tok2", b"finish", b"[DONE]")]


@pytest.mark.parametrize("per_event", [True, False])
async def test_one_event_mid_answer_is_written_at_once_or_behind_those_still_queued(per_event: bool) -> None:
    """`send_one`, the path of nearly every token: at once when nothing waits, else in its place."""
    t, ended = _Transport(), []
    writes = StreamWrites(t, per_event=per_event, on_end=lambda: ended.append(True))
    writes.send_one(b"t1")
    assert t.writes == [_chunk(b"t1")]
    writes.send([b"t2", b"t3"])
    writes.send_one(b"t4")
    for _ in range(4):
        await asyncio.sleep(0)
    expected = [b"t1", b"t2", b"t3", b"t4"] if per_event else [b"t1", b"t2t3", b"t4"]
    assert t.writes == [_chunk(e) for e in expected] and ended == []
    t.closing = True
    writes.send_one(b"t5")
    assert len(t.writes) == len(expected) and ended == [True]  # the client left: nothing more, the stream ends


async def test_token_mode_stops_writing_when_the_client_leaves() -> None:
    t, ended = _Transport(), []
    writes = StreamWrites(t, per_event=True, on_end=lambda: ended.append(True))
    writes.send([b"1", b"2", b"3"], last=True)
    t.closing = True
    await asyncio.sleep(0)
    assert t.writes == [_chunk(b"1")] and ended == [True]


@pytest.mark.parametrize("per_token", [False, True])
async def test_fixed_driver_releases_tokens_due_together_one_per_pass_in_token_mode(per_token: bool) -> None:
    clock = FakeClock()
    driver = FixedTimingDriver(0, 0, clock, per_token=per_token)
    order: list[str] = []
    reqs = [SimRequest(name, 4, 3, 0, on_token=lambda r: order.append(r.request_id)) for name in "ab"]
    task = asyncio.ensure_future(driver.run())
    for r in reqs:
        driver.submit(r)
    seen = []
    for _ in range(20):
        await asyncio.sleep(0)
        seen.append(len(order))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert all(r.finished and len(r.token_ns) == 3 for r in reqs)
    steps = sorted({n for n in seen if n})
    assert steps == ([2, 4, 6] if per_token else [6])  # token mode: one token per request per turn of the loop
