"""A worker's line to the process that started it (`harness run --shard i/N --relay`).

`--workers` and `--ray` start one `harness run` a shard; each tells its parent, on stdout, what it does as it
does it — the typed messages of `run/distributed/wire.py`: a phase begun (with its clock's anchor, so a shard
that dies can still be merged), each record as its request ends, each barrier reached, its count of requests
sent before each one leaves (a parent that loses it knows what was in flight), a beat twice a second (a silent
worker is frozen or stuck), and rounds of measuring its clock against the parent's. After reaching a barrier
it waits on stdin for the parent's `Go`: sent when every live shard has got there, so phase P (with its batch
0), and each later batch b, starts across all shards together — one timeline for the whole run, phases never
overlapping across shards. The records are on the worker's own disk too; the stream is what lets the parent
show, export and keep them as they end.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import IO

from harness.records import RequestRecord, record_fields
from harness.run.distributed.wire import (
    AtBarrier,
    Beat,
    ClockAnswer,
    ClockAsk,
    Go,
    Message,
    PhaseBegun,
    RecordEnded,
    decode,
    encode,
)
from harness.run.observe import PhaseStart
from harness.voice import QUIET, Voice

PHASE_START = -1  # the barrier before a phase's first send (batches count from 0)
BEAT_S = 0.5  # a worker says it is alive this often: a silence of 2 s is four beats missed
CLOCK_ROUNDS = 5  # round trips to the parent; the one with the shortest round trip measures the offset
CLOCK_TIMEOUT_S = 5.0


def _is_answer(message: Message | None, k: int) -> bool:
    return isinstance(message, ClockAnswer) and message.n == k


class Relay:
    def __init__(self, out: IO[bytes] | None = None, inp: IO[bytes] | None = None,
                 voice: Voice = QUIET) -> None:
        self._out = out if out is not None else sys.stdout.buffer
        self._in = inp if inp is not None else sys.stdin.buffer
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._sent = 0  # the current phase's requests gone so far, as the dispatcher said
        self.voice = voice
        self.lost = False  # the parent stopped reading: the records stay on this shard's disk only
        self._beats: asyncio.Task[None] | None = None

    def _say(self, message: Message) -> None:
        if not self.lost:
            try:
                self._out.write(encode(message))
            except OSError:  # BrokenPipeError: the parent is gone
                self._lose()

    def _lose(self) -> None:
        self.lost = True
        self.voice.warn("the parent stopped reading this worker's records: they stay in its run directory "
                        "(`harness merge` joins the shards)")

    def sent(self) -> int:
        return self._sent

    def begin_phase(self, start: PhaseStart) -> None:
        self._sent = 0
        self.phase(start.phase.name)

    def end_phase(self) -> None:
        pass

    def phase(self, name: str) -> None:
        anchor = {"monotonic_ns": time.monotonic_ns(), "wall_ns": time.time_ns()}  # MonotonicClock's time
        self._say(PhaseBegun(name, anchor, self.sent()))
        self.flush()

    def launched(self, sent: int) -> None:
        """Said, and flushed, just before the request's bytes go: a parent that loses this worker (kill -9,
        its Ray actor gone) counts what was in flight from the count the endpoint saw, not one a beat old (a
        beat a second left a killed worker's loss stale: 3 in flight counted where 6 were)."""
        self._sent = sent
        self._say(Beat(sent))
        self.flush()

    def start_beats(self) -> None:
        """Say twice a second that this worker is alive, until its event loop ends."""
        if self._beats is None:
            self._beats = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        while not self.lost:
            self._say(Beat(self.sent()))
            self.flush()
            await asyncio.sleep(BEAT_S)

    async def clock_offset(self) -> tuple[float, float] | None:
        """(the parent's wall clock − this one's, ± its uncertainty), ms, NTP-style: the round trip of
        CLOCK_ROUNDS with the shortest time, its offset against the midpoint, half that time the uncertainty.
        None: the parent did not answer (it is gone, or older)."""
        try:
            return await asyncio.wait_for(self._rounds(), CLOCK_TIMEOUT_S)
        except TimeoutError:
            return None

    async def _rounds(self) -> tuple[float, float] | None:
        best: tuple[int, int] | None = None  # (round trip, offset), ns
        reader = await self._stdin()
        for k in range(CLOCK_ROUNDS):
            t0 = time.time_ns()
            self._say(ClockAsk(k, self.sent()))
            self.flush()
            while (line := await reader.readline()) and not _is_answer(answer := decode(line), k):
                pass
            t2 = time.time_ns()
            if self.lost or not line or not isinstance(answer, ClockAnswer):
                return None
            rtt, offset = t2 - t0, answer.t1 - (t0 + t2) // 2
            best = min(best or (rtt, offset), (rtt, offset))
        assert best is not None
        return best[1] / 1e6, best[0] / 2e6

    def record(self, rec: RequestRecord) -> None:
        self._say(RecordEnded(record_fields(rec), self.sent()))  # flushed with the records file, a batch at a time

    def flush(self) -> None:
        if not self.lost:
            try:
                self._out.flush()
            except OSError:
                self._lose()

    async def barrier(self, phase: str, batch: int) -> None:
        """Until the parent says every shard has ended its share of the batches before `batch`."""
        self._say(AtBarrier(phase, batch, self.sent()))
        self.flush()
        if self.lost:
            return
        reader = await self._stdin()
        while line := await reader.readline():
            if decode(line) == Go(phase, batch):
                return
        self.voice.warn(f"the parent closed its line at batch {batch} of {phase}: going on without the barrier")

    async def _stdin(self) -> asyncio.StreamReader:
        if self._reader is None:
            reader = asyncio.StreamReader()
            self._transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), self._in)
            self._reader = reader
        return self._reader

    def close(self) -> None:
        if self._beats is not None:
            self._beats.cancel()
        if self._transport is not None:
            self._transport.close()
