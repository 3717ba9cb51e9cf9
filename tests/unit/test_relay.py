"""The workers' relay lines: a worker's barrier over real pipes, and the parent's hub with fake workers. The fakes
speak the wire's raw JSON, so these also hold the typed messages (run/distributed/wire.py) to the bytes a worker or
parent of an earlier version sends."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import orjson
import pytest

from harness.config.scenario import parse_scenario
from harness.records import RequestRecord, record_fields
from harness.run.distributed import wire
from harness.run.distributed.hub import Hub
from harness.run.distributed.relay import Relay
from harness.run.observe import FanOut, PhaseStart
from harness.voice import Heard
from harness.workload.plan import plan_phase


def relay_line(message: dict[str, object]) -> bytes:
    return wire.MARK + orjson.dumps(message) + b"\n"


def parse_line(line: bytes) -> dict[str, object] | None:
    return orjson.loads(line[1:]) if line.startswith(wire.MARK) else None

SCENARIO = parse_scenario({
    "name": "two", "workload": {"prompt_tokens": 10, "output_tokens": 4},
    "phases": [{"name": "chat", "load": {"type": "poisson", "rate": 5, "requests": 6}},
               {"name": "batch", "load": {"type": "batch", "size": 4, "batches": 3}}]}, "test")
PLANS = [plan_phase(SCENARIO, i, "count") for i in range(len(SCENARIO.phases))]


def hub_of(n: int, send: Callable[[int, bytes], None], seen: Counts | None = None) -> Hub:
    return Hub(SCENARIO, PLANS, n, send, FanOut(watchers=[("the live exporter", seen)] if seen else []))


def rec(phase: str, i: int) -> RequestRecord:
    return RequestRecord(request_id=f"x-{i}", phase=phase, index=i, prompt_tokens_requested=10, max_tokens=4,
                         intended_ns=i, sent_ns=i, first_token_ns=i + 5, last_token_ns=i + 9, end_ns=i + 9,
                         chunk_ns=[i + 5, i + 9])


async def test_a_worker_waits_at_the_barrier_until_its_parent_says_go() -> None:
    down_r, down_w = os.pipe()  # parent → worker (the worker's stdin)
    up_r, up_w = os.pipe()  # worker → parent (its stdout)
    with open(up_w, "wb") as out, open(down_r, "rb", buffering=0) as inp, open(up_r, "rb") as parent_in:
        relay = Relay(out, inp)
        relay.launched(7)
        assert wire.decode(parent_in.readline()) == wire.Beat(7)
        waiting = asyncio.ensure_future(relay.barrier("batch", 2))
        line = await asyncio.get_running_loop().run_in_executor(None, parent_in.readline)
        assert parse_line(line) == {"k": "at", "name": "batch", "batch": 2, "sent": 7}
        await asyncio.sleep(0.05)
        assert not waiting.done()  # no word from the parent yet
        os.write(down_w, relay_line({"k": "go", "name": "batch", "batch": 1}))  # another barrier's: not this one
        await asyncio.sleep(0.05)
        assert not waiting.done()
        os.write(down_w, relay_line({"k": "go", "name": "batch", "batch": 2}))
        await asyncio.wait_for(waiting, 5)
        relay.close()
        os.close(down_w)


def test_plain_output_is_not_a_relay_line() -> None:
    assert wire.decode(b"report: reports/x\n") is None
    assert wire.decode(relay_line({"k": "phase", "name": "p"})) == wire.PhaseBegun("p")


@pytest.mark.parametrize("message", [
    wire.PhaseBegun("chat", {"monotonic_ns": 5, "wall_ns": 9}, 3), wire.PhaseBegun("chat"),
    wire.RecordEnded({"request_id": "x", "phase": "chat"}, 4), wire.AtBarrier("batch", -1, 2), wire.Beat(7),
    wire.ClockAsk(2, 1), wire.ClockAnswer(2, 123), wire.Go("batch", 0)])
def test_every_message_comes_back_as_it_went(message: wire.Message) -> None:
    line = wire.encode(message)
    assert line.startswith(wire.MARK) and line.endswith(b"\n") and line.count(b"\n") == 1
    assert wire.decode(line) == message


def test_the_bytes_on_the_wire_are_those_earlier_versions_send() -> None:
    assert parse_line(wire.encode(wire.AtBarrier("batch", 2, 7))) == {"k": "at", "name": "batch", "batch": 2,
                                                                      "sent": 7}
    assert parse_line(wire.encode(wire.Go("batch", 1))) == {"k": "go", "name": "batch", "batch": 1}
    assert parse_line(wire.encode(wire.ClockAnswer(0, 5))) == {"k": "clock", "n": 0, "t1": 5}


def test_a_kind_this_side_does_not_know_is_a_relay_line_all_the_same() -> None:
    """A newer worker's message: not printed as the worker's own output, not acted on."""
    assert wire.decode(relay_line({"k": "later", "sent": 1})) is None
    hub = hub_of(1, FakeWorkers().send)
    assert hub.feed(0, relay_line({"k": "later", "sent": 1})) and hub.sent() == 0


class FakeWorkers:
    def __init__(self) -> None:
        self.got: list[tuple[int, dict[str, object] | None]] = []

    def send(self, worker: int, line: bytes) -> None:
        self.got.append((worker, parse_line(line)))


class Counts:
    """What the live exporter is told: the phases begun, and each record as (phase then, its own phase)."""

    def __init__(self) -> None:
        self.phase = ""
        self.begun: list[str] = []
        self.seen: list[tuple[str, str]] = []

    def begin_phase(self, start: PhaseStart) -> None:
        self.phase = start.phase.name
        self.begun.append(start.phase.name)

    def flush(self) -> None:
        pass

    def end_phase(self) -> None:
        pass

    def record(self, r: RequestRecord) -> None:
        self.seen.append((self.phase, r.phase))


def say(hub: Hub, worker: int, message: dict[str, object]) -> None:
    assert hub.feed(worker, relay_line(message))


def test_the_barrier_waits_for_every_live_worker_and_a_dead_one_never_holds_it() -> None:
    fake = FakeWorkers()
    hub = hub_of(3, fake.send)
    say(hub, 0, {"k": "at", "name": "batch", "batch": 1, "sent": 2})
    say(hub, 2, {"k": "at", "name": "batch", "batch": 1, "sent": 1})
    assert fake.got == []  # worker 1 has not ended its share of batch 0
    say(hub, 1, {"k": "at", "name": "batch", "batch": 1, "sent": 1})
    go = {"k": "go", "name": "batch", "batch": 1}
    assert fake.got == [(0, go), (1, go), (2, go)] and hub.released == [("batch", 1)]
    fake.got.clear()
    say(hub, 0, {"k": "at", "name": "batch", "batch": 2, "sent": 4})
    say(hub, 1, {"k": "at", "name": "batch", "batch": 2, "sent": 2})
    hub.ended(2)  # worker 2 died before batch 1 ended: the others go on without it
    go = {"k": "go", "name": "batch", "batch": 2}
    assert fake.got == [(0, go), (1, go)]


def test_records_are_kept_per_worker_and_counted_under_their_own_phase() -> None:
    metrics = Counts()
    hub = hub_of(2, FakeWorkers().send, metrics)
    say(hub, 0, {"k": "phase", "name": "chat", "sent": 0, "anchor": {"monotonic_ns": 5, "wall_ns": 9}})
    say(hub, 1, {"k": "phase", "name": "chat", "sent": 0})
    assert hub.anchors == {0: {"monotonic_ns": 5, "wall_ns": 9}}  # what a dead worker's records are merged on
    say(hub, 0, {"k": "rec", "rec": record_fields(rec("chat", 0)), "sent": 3})
    say(hub, 0, {"k": "phase", "name": "batch", "sent": 3})  # worker 0 is ahead …
    say(hub, 0, {"k": "rec", "rec": record_fields(rec("batch", 1)), "sent": 2})
    say(hub, 1, {"k": "rec", "rec": record_fields(rec("chat", 2)), "sent": 3})  # … worker 1 still answers chat
    assert hub.sent() == 5
    assert metrics.seen == [("chat", "chat"), ("chat", "chat")]  # the early batch record waits
    say(hub, 1, {"k": "phase", "name": "batch", "sent": 3})
    assert metrics.seen[-1] == ("batch", "batch") and len(metrics.seen) == 3
    assert [[r.request_id for r in rs] for rs in hub.records] == [["x-0", "x-1"], ["x-2"]]
    assert not hub.feed(0, b"a plain line\n")


@pytest.mark.parametrize("dead_first", [True, False])
def test_a_phase_begins_when_every_live_worker_has_begun_it(dead_first: bool) -> None:
    seen = Counts()
    hub = hub_of(2, FakeWorkers().send, seen)
    if dead_first:
        hub.ended(1)
    say(hub, 0, {"k": "phase", "name": "chat", "sent": 0})
    assert seen.begun == (["chat"] if dead_first else [])
    if not dead_first:
        hub.ended(1)
        assert seen.begun == ["chat"]


async def test_a_worker_whose_parent_is_gone_goes_on_alone() -> None:
    """The parent died (its end of the pipe closed): the worker keeps its records on its own disk, says so
    once, and no longer waits at barriers nobody will answer."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    warned: list[str] = []
    with open(write_end, "wb", buffering=0) as out, open(os.devnull, "rb") as inp:
        relay = Relay(out, inp, voice=Heard(warned=warned))
        for i in range(3):
            relay.record(rec("chat", i))
            relay.flush()
        assert relay.lost and len(warned) == 1 and "stay in its run directory" in warned[0]
        await asyncio.wait_for(relay.barrier("batch", 1), 1)


def test_a_silent_worker_is_named_and_its_longest_silence_kept() -> None:
    import time

    hub = hub_of(3, FakeWorkers().send)
    for worker in (0, 1):
        assert hub.feed(worker, relay_line({"k": "beat", "sent": 0}))
    now = time.monotonic()
    assert hub.silent(now, 5.0) == {}  # both just spoke; worker 2 has not started: not judged
    quiet = hub.silent(now + 6.0, 5.0)
    assert set(quiet) == {0, 1} and all(5.9 < s < 6.5 for s in quiet.values())
    hub.feed(1, relay_line({"k": "beat", "sent": 3}))
    hub.ended(0)  # an ended worker is never silent
    assert hub.silent(now + 3.0, 5.0) == {} and hub.silent_max[0] == pytest.approx(6.0, abs=0.5)
    assert hub.sent_by(1) == 3


async def test_a_worker_measures_its_clock_against_the_parents() -> None:
    """The parent's clock 250 ms ahead, answers after a 20 ms (then 2 ms) delay: the offset is found within the
    shortest round trip, and the uncertainty is half of it."""
    import threading

    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    with open(up_w, "wb") as out, open(down_r, "rb", buffering=0) as inp, open(up_r, "rb") as parent_in:
        def parent() -> None:
            for k in range(5):
                message = parse_line(parent_in.readline())
                assert message is not None and message["k"] == "clock" and message["n"] == k
                time.sleep(0.02 if k < 3 else 0.002)
                os.write(down_w, relay_line({"k": "clock", "n": k, "t1": time.time_ns() + 250_000_000}))

        answering = threading.Thread(target=parent)
        answering.start()
        relay = Relay(out, inp)
        measured = await relay.clock_offset()
        answering.join(timeout=5)
        relay.close()
        os.close(down_w)
    assert measured is not None
    offset, uncertainty = measured
    assert uncertainty < 15 and abs(offset - 250) <= uncertainty + 1


def test_the_hub_answers_a_clock_round_at_once() -> None:
    fake = FakeWorkers()
    hub = hub_of(2, fake.send)
    say(hub, 1, {"k": "clock", "n": 3, "sent": 0})
    ((worker, answer),) = fake.got
    assert worker == 1 and answer is not None and answer["k"] == "clock" and answer["n"] == 3
    assert abs(int(answer["t1"]) - time.time_ns()) < 1e9


def test_a_worker_says_each_send_before_it_leaves_in_a_line_of_its_own() -> None:
    """The parent of a worker that dies counts what was in flight from the last `sent` it heard: the count is
    written and flushed at once (no await between), not at the next beat."""
    import io

    class Flushes(io.BytesIO):
        flushed = b""

        def flush(self) -> None:
            self.flushed = self.getvalue()

    out = Flushes()
    relay = Relay(out=out)
    relay.launched(1)
    relay.launched(2)
    said = [wire.decode(line) for line in out.flushed.splitlines(keepends=True)]
    assert said == [wire.Beat(1), wire.Beat(2)]


async def test_a_worker_beats_while_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from harness.run.distributed import relay as relay_module

    monkeypatch.setattr(relay_module, "BEAT_S", 0.02)
    out = io.BytesIO()
    relay = Relay(out=out)
    relay.launched(7)
    relay.start_beats()
    try:
        started = time.monotonic()
        while len(out.getvalue().splitlines()) < 3:
            assert time.monotonic() - started < 5.0, "fewer than three beats in 5 s at one per 20 ms"
            await asyncio.sleep(0.01)
    finally:
        relay.close()
    assert {wire.decode(line) for line in out.getvalue().splitlines(keepends=True)} == {wire.Beat(7)}


@pytest.mark.parametrize("line", [
    b"\x1e{\"k\": \"rec\", \"rec\": {\"request_id\"",  # cut mid-write
    b"\x1e{\"k\": \"rec\", \"rec\": 5}",
    b"\x1e{\"k\": \"rec\", \"rec\": {\"request_id\": 1}}",
    b"\x1e[1, 2]",
    b"\x1e{\"k\": \"phase\"}",
])
def test_a_garbled_relay_line_is_the_workers_output_not_a_traceback(line: bytes) -> None:
    assert line.startswith(wire.MARK)
    try:
        wire.decode(line)  # a message whose record is not one, or a ValueError: nothing else
    except ValueError as exc:
        assert "a relay line cut or garbled" in str(exc)
    hub = hub_of(1, FakeWorkers().send)
    assert hub.feed(0, line) is False and hub.records == [[]]  # to the worker's log, no record taken
