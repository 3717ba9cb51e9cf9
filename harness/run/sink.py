"""Where each finished record goes: redacted, kept in memory for its phase and the run, written to disk, and
shown to whoever watches the run (the progress line, the live exporter, the parent of a worker) — one
`FanOut` of `RecordObserver`s (harness.run.observe), fed in batches.

Nothing a record meets here can lose it. It is kept in memory first, so the summary counts every request sent
(up to the scenario's `client.records_in_memory`; past it, its phase's statistics fold it:
`harness.stats.keep`); the writer never raises (see `RecordWriter`); a watcher that raises is cut off from
that record only, and said once per kind of failure — one line, never a dump of the records pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.config.scenario import SLO
from harness.limits import SERVER_MESSAGE_CHARS
from harness.records import RecordWriter, RequestRecord
from harness.redact import short_reason
from harness.run.observe import FanOut, PhaseStart, RecordObserver
from harness.stats.keep import PhaseKeep, RunSample, next_phase
from harness.voice import QUIET, Voice

FLUSH_S = 0.05


@dataclass
class Redaction:
    """A record's failure reason and the server's message, shortened and with secrets taken out, before any
    other observer reads them: servers echo keys back in their errors."""

    redact: Callable[[str], str]

    def begin_phase(self, start: PhaseStart) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        if rec.reason:
            rec.reason = short_reason(rec.reason, self.redact)
        if rec.message:
            rec.message = short_reason(rec.message, self.redact, SERVER_MESSAGE_CHARS)

    def flush(self) -> None:
        pass

    def end_phase(self) -> None:
        pass


@dataclass
class Memory:
    """The records in memory: the current phase's (for its statistics) and the run's sample (for the
    report)."""

    slo: SLO
    cap: int | None  # the scenario's client.records_in_memory
    run: RunSample = field(init=False)
    phase: PhaseKeep = field(init=False)

    def __post_init__(self) -> None:
        self.run = RunSample(self.cap)
        self.phase = PhaseKeep(self.slo, None)

    def begin_phase(self, start: PhaseStart) -> None:
        self.phase = next_phase(self.slo, self.cap, self.run, start.phase.warmup_s, start.phase.cooldown_s)

    def record(self, rec: RequestRecord) -> None:
        self.phase.add(rec)
        self.run.add(rec)

    def flush(self) -> None:
        pass

    def end_phase(self) -> None:
        if self.phase.count:
            self.phase.close()


class RecordSink:
    """Records are taken in batches, `FLUSH_S` after the first of a batch ended: the end of one request and
    the next send of its closed-loop user stay free of file writes, and a wave of requests ending together
    costs two writes to the OS, not two per record. A crash loses at most the last `FLUSH_S` of records."""

    def __init__(self, writer: RecordWriter, redact: Callable[[str], str], slo: SLO | None = None,
                 cap: int | None = None, watchers: Sequence[tuple[str, RecordObserver]] = (),
                 voice: Voice = QUIET) -> None:
        self.memory = Memory(slo or SLO(), cap)
        self.out = FanOut([Redaction(redact), self.memory, writer], watchers, voice)
        self._pending: list[RequestRecord] = []
        self._timer: asyncio.TimerHandle | None = None

    @property
    def run(self) -> RunSample:
        return self.memory.run

    @property
    def phase(self) -> PhaseKeep:
        return self.memory.phase

    def __call__(self, rec: RequestRecord) -> None:
        self._pending.append(rec)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, []
        for rec in pending:
            self.out.record(rec)
        if pending:
            self.out.flush()

    def begin_phase(self, start: PhaseStart) -> None:
        self.out.begin_phase(start)

    def end_phase(self) -> None:
        self.flush()
        self.out.end_phase()
