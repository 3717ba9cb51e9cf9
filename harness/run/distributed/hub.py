"""The parent's end of its workers' relay lines (`--workers`, `--ray`; `relay.py` is the other end,
`wire.py` their messages).

One merged stream: each record, as its worker's request ends, is kept under its shard and fed to the parent's
progress line and live exporter (one `FanOut`, as a run's own records have). A phase begins in the parent's
view when every live worker has begun it (each worker's lines come in order, so none of the phase before is
still to come); records of a phase some workers have begun before the others wait for it, so every record is
counted under its own phase. Fixed batches keep one barrier across the shards: batch b starts when every live
shard has ended its share of the batches before it. A worker that has ended (finished or died) never holds the
others at a barrier.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.config.scenario import Scenario
from harness.records import RequestRecord, record_from
from harness.run.distributed.wire import (
    MARK,
    AtBarrier,
    Beat,
    ClockAnswer,
    ClockAsk,
    Go,
    PhaseBegun,
    RecordEnded,
    decode,
    encode,
)
from harness.run.observe import FanOut, PhaseStart
from harness.stats.schema import ClientHealth
from harness.workload.plan import PhasePlan

Send = Callable[[int, bytes], None]  # a line to worker i's stdin


class Hub:
    def __init__(self, scenario: Scenario, plans: list[PhasePlan], n: int, send: Send,
                 out: FanOut | None = None) -> None:
        """`plans`: each phase planned whole, once, by the parent (what it announces and counts)."""
        self.scenario, self.plans = scenario, plans
        self.records: list[list[RequestRecord]] = [[] for _ in range(n)]
        self.alive = set(range(n))
        self.released: list[tuple[str, int]] = []  # barriers passed, in order
        self.anchors: dict[int, dict[str, int]] = {}  # each worker's clock against wall time, as it said
        self.out = out or FanOut()
        self._send = send
        self._sent = [0] * n  # each worker's requests sent in its current phase
        self._sent_before = [0] * n  # … and in the phases before it
        self.phase_of: list[str | None] = [None] * n  # the phase each worker said it began last
        # When each worker last said anything (it beats every second from its start; None: not started yet).
        self.seen: list[float | None] = [None] * n
        self.silent_max: dict[int, float] = {}  # the longest silence past SILENT_S of each worker, seconds
        self.silences: dict[int, dict[str, float]] = {}  # … and per phase it was in (the one it began last)
        self.coordinator: ClientHealth | None = None  # the parent's own self-check over the run
        self._begun: dict[str, set[int]] = {}
        self._current = -1  # the phase the parent's view is in
        self._early: list[RequestRecord] = []  # records of phases the parent's view has not begun
        self._at: dict[tuple[str, int], set[int]] = {}

    def sent(self) -> int:
        return sum(self._sent)

    def sent_by(self, worker: int) -> int:
        """Requests worker `worker` said it had sent, over every phase so far."""
        return self._sent_before[worker] + self._sent[worker]

    def feed(self, worker: int, line: bytes) -> bool:
        """Take one line of worker `worker`'s output; False if it was not a relay message (plain output)."""
        if not line.startswith(MARK):
            return False
        self.seen[worker] = time.monotonic()
        try:
            message = decode(line)
        except ValueError:  # cut or garbled: the worker's log keeps it
            return False
        if isinstance(message, PhaseBegun):
            self._sent_before[worker] += self._sent[worker]
            self._sent[worker] = 0
            self.phase_of[worker] = message.name
            if message.anchor is not None:
                self.anchors.setdefault(worker, message.anchor)
            self._begun.setdefault(message.name, set()).add(worker)
            self._advance()
            return True
        if isinstance(message, RecordEnded | AtBarrier | ClockAsk | Beat):
            self._sent[worker] = message.sent
        if isinstance(message, RecordEnded):
            try:
                rec = record_from(message.rec)
            except ValueError:  # not a record: the worker's log keeps the line
                return False
            self.records[worker].append(rec)
            if self._current >= 0 and rec.phase == self.scenario.phases[self._current].name:
                self._show(rec)
            else:
                self._early.append(rec)
        elif isinstance(message, ClockAsk):  # answered at once: the worker measures its clock against this one's
            self._send(worker, encode(ClockAnswer(message.n, time.time_ns())))
        elif isinstance(message, AtBarrier):
            self._at.setdefault((message.name, message.batch), set()).add(worker)
            self._release()
        return True

    def silent(self, now: float, limit_s: float) -> dict[int, float]:
        """Live workers that have said nothing for more than `limit_s`, with how long (kept as their
        maximum)."""
        quiet = {w: now - seen for w in self.alive if (seen := self.seen[w]) is not None and now - seen > limit_s}
        for w, seconds in quiet.items():
            self.silent_max[w] = max(self.silent_max.get(w, 0.0), seconds)
            if (phase := self.phase_of[w]) is not None:
                per = self.silences.setdefault(w, {})
                per[phase] = round(max(per.get(phase, 0.0), seconds), 1)
        return quiet

    def ended(self, worker: int) -> None:
        self.alive.discard(worker)
        self._advance()
        self._release()

    def close(self) -> None:
        """Every worker has ended: the last phase too, for the live view and exporter."""
        if self._current >= 0:
            self.out.end_phase()

    def _advance(self) -> None:
        phases = self.scenario.phases
        while self._current + 1 < len(phases) and (
                begun := self._begun.get(phases[self._current + 1].name)) and self.alive <= begun:
            if self._current >= 0:
                self.out.end_phase()
            self._current += 1
            self.out.begin_phase(PhaseStart(phases[self._current], self.plans[self._current], self.sent))
            name = phases[self._current].name
            for rec in [r for r in self._early if r.phase == name]:
                self._show(rec)
            self._early = [r for r in self._early if r.phase != name]

    def _show(self, rec: RequestRecord) -> None:
        self.out.record(rec)

    def _release(self) -> None:
        for key, arrived in list(self._at.items()):
            if self.alive <= arrived:
                del self._at[key]
                self.released.append(key)
                for worker in sorted(arrived & self.alive):
                    self._send(worker, encode(Go(*key)))
