"""What the run has done so far, against what its phase plans: the figures a live display shows."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S, Clock
from harness.records import RequestRecord
from harness.run.observe import PhaseStart
from harness.stats.metrics import ttft_ns
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan

_BAR = 12  # cells of the progress bar: room for the rest of the line at 80 columns


@dataclass(frozen=True, slots=True)
class Goal:
    """How much a phase plans: requests when counted ahead, seconds of sending when its length is set."""

    requests: int | None
    seconds: float | None


def goal(plan: PhasePlan) -> Goal:
    if isinstance(plan, BatchPlan):
        return Goal(sum(len(b) for b in plan.batches), None)
    if isinstance(plan, ClosedLoopPlan):
        return Goal(plan.requests, None if plan.duration_ns is None else plan.duration_ns / NS_PER_S)
    last = float(plan.offsets_ns[-1]) / NS_PER_S if len(plan.offsets_ns) else 0.0
    # A session's turns are not known ahead (they follow the answers); its first turns' schedule is.
    return Goal(len(plan.specs) if isinstance(plan, OpenLoopPlan) else None, last)


def _clock_text(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s} s"


class Progress:
    """Fed every finished record; read by a display for the current phase's progress and recent figures."""

    def __init__(self, clock: Clock, phases: int) -> None:
        self.clock = clock
        self.sent: Callable[[], int] = lambda: 0  # the current phase's requests sent so far
        self.phases = phases
        self.index = 0
        self.phase = ""
        self.goal = Goal(None, None)
        self._start = clock.now_ns()
        self._done = self._errors = self._tokens = 0
        self._ttft_ns: deque[int] = deque(maxlen=2000)  # the recent ones: "so far" stays current

    def begin_phase(self, start: PhaseStart) -> None:
        self.start(start.phase.name, goal(start.plan), start.launched)

    def flush(self) -> None:
        pass

    def end_phase(self) -> None:
        pass

    def start(self, name: str, planned: Goal, sent: Callable[[], int] = lambda: 0) -> None:
        """A phase begins: `planned` is its goal, `sent` its count of requests sent so far."""
        self.sent = sent
        self.index += 1
        self.phase, self.goal = name, planned
        self._start = self.clock.now_ns()
        self._done = self._errors = self._tokens = 0
        self._ttft_ns.clear()

    def record(self, rec: RequestRecord) -> None:
        self._done += 1
        if rec.status != "ok":
            self._errors += 1
            return
        self._tokens += rec.delivered_tokens
        ttft = ttft_ns(rec)
        if ttft is not None:
            self._ttft_ns.append(ttft)

    def _elapsed_s(self) -> float:
        return max(self.clock.now_ns() - self._start, 1) / NS_PER_S

    def _share(self) -> float | None:
        if self.goal.requests:
            return min(self._done / self.goal.requests, 1.0)
        if self.goal.seconds:
            return min(self._elapsed_s() / self.goal.seconds, 1.0)
        return None

    def _left(self) -> str:
        elapsed = self._elapsed_s()
        if self.goal.seconds is not None:
            left = self.goal.seconds - elapsed
            return f"{_clock_text(left)} left" if left > 0 else "draining"
        if self.goal.requests and self._done:
            return f"~{_clock_text((self.goal.requests - self._done) * elapsed / self._done)} left"
        return "-"

    def where(self) -> str:
        """Which phase, how far through its plan, how long it has left."""
        share = self._share()
        bar = "" if share is None else "█" * round(share * _BAR) + "░" * (_BAR - round(share * _BAR)) + " "
        of = f"{self._done:,}/{self.goal.requests:,} req" if self.goal.requests else (
            f"{_clock_text(self._elapsed_s())}/{_clock_text(self.goal.seconds or 0)}")
        return f"phase {self.index}/{self.phases} {self.phase}  {bar}{of}  {self._left()}"

    def how(self) -> str:
        """The phase's figures so far: sent and done, rates, the recent median TTFT, errors."""
        elapsed = self._elapsed_s()
        ttft = f"{np.median(self._ttft_ns) / NS_PER_MS:,.1f} ms" if self._ttft_ns else "-"
        return (f"sent {self.sent():,}  done {self._done:,}  {self._done / elapsed:,.1f} req/s  "
                f"{self._tokens / elapsed:,.0f} tok/s  TTFT p50 {ttft}  errors {self._errors:,}")

    def line(self) -> str:
        return f"{self.where()} | {self.how()}"
