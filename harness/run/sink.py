"""Where each finished record goes: into memory for its phase and the run, to disk, and to whoever watches the
run (the progress line, the live exporter, the parent of a worker).

Nothing a record meets here can lose it. It is kept in memory first, so the summary counts every request sent
(up to the scenario's `client.records_in_memory`; past it, its phase's statistics fold it: `harness.stats.keep`);
the writer never raises (see `RecordWriter`); an observer that raises is cut off from that record only, and said
once per kind of failure — one line, never a dump of the records pending.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.config.load import Phase, describe
from harness.config.scenario import SLO
from harness.records import RecordWriter, RequestRecord
from harness.redact import MESSAGE_LIMIT, short_reason
from harness.run.exporter import LiveMetrics
from harness.run.progress import Progress, goal
from harness.run.relay import Relay
from harness.stats.keep import PhaseKeep, RunSample, next_phase
from harness.stats.phase import span_rate
from harness.workload.plan import OpenLoopPlan, PhasePlan, SessionPlan

FLUSH_S = 0.05


@dataclass
class RecordSink:
    """Where each finished record goes: to disk, to its phase, to the run, to the progress line and exporter.

    Records are taken in batches, `FLUSH_S` after the first of a batch ended: the end of one request and
    the next send of its closed-loop user stay free of file writes, and a wave of requests ending together
    costs two writes to the OS, not two per record. A crash loses at most the last `FLUSH_S` of records.
    """

    writer: RecordWriter
    redact: Callable[[str], str]
    slo: SLO = field(default_factory=SLO)
    cap: int | None = None  # the scenario's client.records_in_memory
    phase: PhaseKeep = field(default_factory=lambda: PhaseKeep(SLO(), None))
    run: RunSample = field(init=False)
    progress: Progress | None = None
    metrics: LiveMetrics | None = None
    relay: Relay | None = None
    warn: Callable[[str], None] = lambda _: None
    _pending: list[RequestRecord] = field(default_factory=list)
    _timer: asyncio.TimerHandle | None = None
    _said: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.run = RunSample(self.cap)

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
            self._take(rec)
        if pending:
            self.writer.flush()
            if self.relay is not None:
                self.relay.flush()

    def _take(self, rec: RequestRecord) -> None:
        if rec.reason:
            rec.reason = short_reason(rec.reason, self.redact)  # before anyone reads it: servers echo keys
        if rec.message:
            rec.message = short_reason(rec.message, self.redact, MESSAGE_LIMIT)
        self.phase.add(rec)
        self.run.add(rec)
        self.writer.write(rec)
        for name, watcher in (("the progress line", self.progress), ("the live exporter", self.metrics),
                              ("the relay to the parent", self.relay)):
            if watcher is not None:
                try:
                    watcher.record(rec)
                except Exception as exc:
                    self._failed(name, exc)

    def _failed(self, name: str, exc: Exception) -> None:
        """Said once per watcher and kind of failure: one line, never a line per record."""
        kind = f"{name}: {type(exc).__name__}"
        if kind not in self._said:
            self._said.add(kind)
            self.warn(f"{name} failed on a record ({type(exc).__name__}: {exc}); the record is kept, {name} misses it")

    def begin_phase(self, phase: Phase, plan: PhasePlan, launched: Callable[[], int]) -> None:
        self.phase = next_phase(self.slo, self.cap, self.run, phase.warmup_s, phase.cooldown_s)
        if self.relay is not None:
            self.relay.phase(phase.name)
        announce_phase(phase, plan, launched, self.progress, self.metrics)


def announce_phase(phase: Phase, plan: PhasePlan, launched: Callable[[], int], progress: Progress | None,
                   metrics: LiveMetrics | None) -> None:
    """Tell the progress line and the live exporter that `phase` (planned as `plan`) begins."""
    if progress is not None:
        progress.begin_phase(phase.name, goal(plan))
    if metrics is not None:
        offsets = plan.offsets_ns if isinstance(plan, OpenLoopPlan | SessionPlan) else None
        metrics.begin_phase(phase.name, describe(phase.load), None if offsets is None else span_rate(offsets.tolist()),
                            launched)
