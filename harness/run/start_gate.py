"""What the runner needs from a run split across processes or hosts, as protocols: `run/distributed/` provides
them (`Sharding`, its `PhaseGate`, its `Relay`), and the runner depends on these alone — so nothing of the
scale-out side is imported by the runner, nor the runner by it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.config.load import Phase
from harness.run.observe import RecordObserver
from harness.stats.schema import RunHeader, ShardInfo
from harness.voice import Voice
from harness.workload.plan import PhasePlan
from harness.workload.shards import Shard


class PhaseStarts(Protocol):
    """When each phase may begin on this shard, and how late against its plan each began."""

    late_ms: dict[str, float]

    async def before(self, k: int, phase: str) -> None: ...


@dataclass
class AtOnce:
    """One process's run: every phase begins when the one before it ended."""

    late_ms: dict[str, float] = field(default_factory=dict)

    async def before(self, k: int, phase: str) -> None:
        return None


class ParentLine(RecordObserver, Protocol):
    """The line to a parent that started this shard: it follows the records, and holds each batch's
    barrier."""

    async def barrier(self, phase: str, batch: int) -> None: ...

    def launched(self, sent: int) -> None:
        """A request is about to leave (or ended unsent): `sent` of this phase have, said before its bytes
        go."""


class StartGate(Protocol):
    """This process's share of a split run: which shard, from when, lined up how with the other shards."""

    @property
    def shard(self) -> Shard: ...

    @property
    def start_at(self) -> float: ...

    @property
    def relay(self) -> ParentLine | None: ...

    def info(self) -> ShardInfo: ...

    def gate(self, phases: list[Phase], whole: list[PhasePlan], voice: Voice) -> PhaseStarts: ...

    async def wait(self, run_dir: Path, header: RunHeader, voice: Voice) -> RunHeader: ...
