"""A run's sweeps, found once: the phases one sweep expanded into (`name@rate=4`, …) and the knee of each —
the fastest point still meeting the SLOs for 95% of its requests. `Summary.sweeps` holds them for every reader
(the table, the answer, the report, the conclusion)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.stats.schema.phase import PhaseSummary

KNEE_GOODPUT = 0.95


def knee(points: Sequence[PhaseSummary], goodput: float = KNEE_GOODPUT) -> PhaseSummary | None:
    """The highest-throughput point whose goodput share still meets `goodput`: the capacity under the SLOs."""
    good = [p for p in points if p.goodput.fraction >= goodput]
    return max(good, key=lambda p: p.throughput.output_tokens_per_s) if good else None


@dataclass(frozen=True, slots=True)
class SweepResult:
    """One sweep of a run: its points in the order run, and its knee."""

    of: str  # the scenario's phase the sweep expanded
    points: tuple[PhaseSummary, ...]
    knee: PhaseSummary | None  # None: no point met the SLOs

    @property
    def names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.points)


def find_sweeps(phases: Sequence[PhaseSummary]) -> tuple[SweepResult, ...]:
    """The sweeps among `phases`: expanded points are named `phase@key=value` (config/load.py), the one mark a
    saved summary keeps; a sweep of one point is none."""
    groups: dict[str, list[PhaseSummary]] = {}
    for phase in phases:
        base, sep, _ = phase.name.partition("@")
        if sep:
            groups.setdefault(base, []).append(phase)
    return tuple(SweepResult(of, tuple(points), knee(points)) for of, points in groups.items() if len(points) >= 2)
