"""Whoever follows a run's finished records: one protocol and one fan-out, for a run's own records (the sink)
and for the records its workers stream back (the hub of `--workers`/`--ray`).

An observer is told when a phase begins (`PhaseStart`: the phase, its plan, how many requests have been sent
so far), takes each finished record in the order they ended, flushes when a batch of records has been taken,
and is told when the phase ends. The fan-out calls them in order. The observers the run cannot do without
(redaction, the records kept in memory, the records file) are `essential`: their failure is the run's. The
others (the progress line, the live exporter, the relay to a parent) are `watchers`: one that raises is cut
off from that record only and said once per kind of failure, so a broken dashboard never costs a record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.config.load import Phase
from harness.records import RequestRecord
from harness.voice import QUIET, Voice
from harness.workload.plan import PhasePlan


@dataclass(frozen=True, slots=True)
class PhaseStart:
    phase: Phase
    plan: PhasePlan
    launched: Callable[[], int]  # requests sent so far in this phase (read when needed, never pushed)


class RecordObserver(Protocol):
    def begin_phase(self, start: PhaseStart) -> None: ...

    def record(self, rec: RequestRecord) -> None: ...

    def flush(self) -> None: ...

    def end_phase(self) -> None: ...


@dataclass
class FanOut:
    essential: Sequence[RecordObserver] = ()
    watchers: Sequence[tuple[str, RecordObserver]] = ()  # (how it is named in a warning, the observer)
    voice: Voice = QUIET
    _said: set[str] = field(default_factory=set)

    def begin_phase(self, start: PhaseStart) -> None:
        self._each("begin_phase", start)

    def record(self, rec: RequestRecord) -> None:
        for observer in self.essential:
            observer.record(rec)
        for name, watcher in self.watchers:
            try:
                watcher.record(rec)
            except Exception as exc:
                self._failed(name, exc)

    def flush(self) -> None:
        self._each("flush")

    def end_phase(self) -> None:
        self._each("end_phase")

    def _each(self, method: str, *args: object) -> None:
        for observer in self.essential:
            getattr(observer, method)(*args)
        for name, watcher in self.watchers:
            try:
                getattr(watcher, method)(*args)
            except Exception as exc:
                self._failed(name, exc)

    def _failed(self, name: str, exc: Exception) -> None:
        """Said once per watcher and kind of failure: one line, never a line per record."""
        kind = f"{name}: {type(exc).__name__}"
        if kind not in self._said:
            self._said.add(kind)
            self.voice.warn(f"{name} failed ({type(exc).__name__}: {exc}); the records are kept, {name} misses them")
