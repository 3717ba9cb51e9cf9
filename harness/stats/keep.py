"""A phase's records as a run holds them while it goes: every one, up to the run's `records_in_memory`; past
it, the records certainly inside the measurement window go into the phase's fold (histograms: within 0.1%) and
are let go, so a long run's memory stops growing. The records are on disk by then (`requests.jsonl`). Pure."""

from __future__ import annotations

from collections import deque

from harness.clock import NS_PER_S
from harness.config.scenario import SLO
from harness.records import RequestRecord
from harness.stats.phase import PhaseFold, windows_between


class PhaseKeep:
    """`cap` 0 for a phase that begins when the run already holds its records_in_memory: it lets every record
    go as soon as it can (so the records a run holds stay under twice the cap, however many phases it has)."""

    def __init__(self, slo: SLO, cap: int | None, warmup_s: float = 0.0, cooldown_s: float = 0.0) -> None:
        self.slo, self.cap = slo, cap
        self.warmup_s, self.cooldown_s = warmup_s, cooldown_s
        self._queue: deque[RequestRecord] = deque()  # in the order they ended
        self._warmup: list[RequestRecord] = []  # let go of, but intended in what may be the warm-up
        self.fold: PhaseFold | None = None
        self.count = 0
        self.first: int | None = None  # the earliest intended send, and the latest end, of every record taken
        self.last: int | None = None

    @property
    def held(self) -> list[RequestRecord]:
        return [*self._queue, *self._warmup]

    def add(self, rec: RequestRecord) -> None:
        self.count += 1
        self.first = rec.intended_ns if self.first is None else min(self.first, rec.intended_ns)
        self.last = rec.end_ns if self.last is None else max(self.last, rec.end_ns)
        self._queue.append(rec)
        if self.fold is not None or (self.cap is not None and len(self._queue) > self.cap):
            self._let_go(4)  # a few a record: the queue drains to the cool-down's, and nothing stalls on a fold

    def _let_go(self, most: int) -> None:
        """Fold the oldest records no later record can move out of the measurement window: ended before the
        cool-down of the latest end seen (a later end only widens that margin) and intended after the warm-up
        of the earliest send seen (an earlier one only widens it). The warm-up's records wait for the phase's
        end; the last cool-down's worth stay queued."""
        assert self.first is not None and self.last is not None
        if self.fold is None:
            self.fold = PhaseFold(self.slo)
            self.fold.to_histograms()
        start, end = self.first + int(self.warmup_s * NS_PER_S), self.last - int(self.cooldown_s * NS_PER_S)
        for _ in range(most):
            if not self._queue or self._queue[0].end_ns > end:
                return
            rec = self._queue.popleft()
            if rec.intended_ns < start:
                self._warmup.append(rec)
            else:
                self.fold.add(rec)

    def close(self) -> None:
        """The phase has ended: if it let records go, the ones still held go too — its window is known now, so
        each goes into the fold as it would have with every record in hand."""
        if self.fold is None or self.first is None or self.last is None:
            return
        _, window = windows_between(self.first, self.last, self.warmup_s, self.cooldown_s)
        for rec in sorted(self.held, key=lambda r: r.index):
            self.fold.add(rec, (window.start_ns, window.end_ns))
        self._queue, self._warmup = deque(), []

    @property
    def let_go(self) -> tuple[PhaseFold, tuple[int, int]] | None:
        """The fold of the records let go and the span of all taken, for `fold_phase`; None if none was."""
        if self.fold is None or self.first is None or self.last is None:
            return None
        return self.fold, (self.first, self.last)

def next_phase(slo: SLO, cap: int | None, run: RunSample, warmup_s: float, cooldown_s: float) -> PhaseKeep:
    """The keep of a phase that begins now: a run already past its cap lets the new phase's records go at
    once."""
    return PhaseKeep(slo, 0 if run.over else cap, warmup_s, cooldown_s)


class RunSample:
    """The run's records for its report and Parquet file: every one up to `cap`; past it, every `every`-th in
    the order they ended (`every` doubling as needed), so a chart counts each kept record `every` times."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.records: list[RequestRecord] = []
        self.every = 1
        self.count = 0

    def add(self, rec: RequestRecord) -> None:
        if self.count % self.every == 0:
            self.records.append(rec)
            if self.cap is not None and len(self.records) > self.cap:
                self.every *= 2
                self.records = self.records[::2]
        self.count += 1

    @property
    def over(self) -> bool:
        return self.every > 1
