"""When each phase of a shard begins, so that a sharded run keeps one timeline: no shard starts phase k+1
before every shard has ended phase k.

With a parent (`--workers`, `--ray`) the parent holds a barrier before each phase and each batch. Shards
started by hand have nobody to ask: each phase starts at a time planned from the common start (the phases'
schedules and a slack after each, `workload.shards.timetable`), and a shard that ends a phase after the next
one was due says so, by how much, in its run and in the merge (`phase_late_ms`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.config.load import Phase
from harness.run.distributed.relay import PHASE_START, Relay
from harness.voice import QUIET, Voice
from harness.workload.plan import BatchPlan, PhasePlan
from harness.workload.shards import LATE_MS, planned_span_s, timetable


@dataclass
class PhaseGate:
    relay: Relay | None = None  # a parent's barrier
    starts: Sequence[float | None] = ()  # shards by hand: each phase's planned start, Unix seconds
    voice: Voice = QUIET
    late_ms: dict[str, float] = field(default_factory=dict)  # phase -> how late it began against its plan

    async def before(self, k: int, phase: str) -> None:
        """Until phase `k` may begin on this shard."""
        if self.relay is not None:
            await self.relay.barrier(phase, PHASE_START)
            return
        if k == 0 or k >= len(self.starts) or (due := self.starts[k]) is None:
            return  # phase 0 waited for the common start already; no plan: at once
        if (delay := due - time.time()) > 0:
            await asyncio.sleep(delay)
        late = max(0.0, (time.time() - due) * 1000)
        self.late_ms[phase] = round(late, 1)
        if late > LATE_MS:
            self.voice.warn(f"phase {phase} began {late:,.0f} ms after its planned start (the previous phase's "
                            "answers ended late): it may overlap the other shards' previous phase; a longer "
                            "--phase-slack keeps the timeline")


def manual_gate(phases: Sequence[Phase], whole: Sequence[PhasePlan], start_at: float, slack_s: float,
                voice: Voice) -> PhaseGate:
    """The gate of a shard started by hand: planned phase starts, and a warning up front for what no plan can
    hold (batches after a phase's first, and the phases after one that only its answers end)."""
    starts = timetable(start_at, [planned_span_s(p) for p in whole], slack_s)
    for phase, plan, start in zip(phases, whole, starts, strict=True):
        if isinstance(plan, BatchPlan) and len(plan.batches) > 1:
            voice.warn(f"phase {phase.name}: shards by hand release each phase's first batch together, the later ones "
                       "when this shard's share of the batch before ended (--workers or --ray hold a barrier for each)")
        if start is None:
            voice.warn(f"phase {phase.name} has no planned start (a phase before it ends only with its answers): it "
                       "begins when this shard's share of the one before ended, and may overlap other shards' "
                       "(give that phase a duration_s, or use --workers or --ray)")
            break
    return PhaseGate(starts=starts, voice=voice)
