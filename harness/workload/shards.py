"""One schedule split exactly across processes or hosts (k6's execution segments, interleaved). Pure.

Shard i of N takes every N-th request of each phase, starting at the i-th: the open-loop arrivals i, i+N,
i+2N… with their own intended times; of each fixed batch the members i, i+N…; of a closed loop the users
i, i+N… and the requests i, i+N… (the same ids and prompts as one process would send); of multi-turn sessions
the conversations i, i+N…. The N shards together are the single-process schedule, request for request.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, replace

from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan, SessionPlan
from harness.workload.requests import LazySpecs

LATE_MS = 50.0  # a shard that begins later than this after the common start is named, in its run and the merge
# … and one that began a phase further than this from its planned start on the common clock (by hand: no
# barrier; late, or early on a clock that was off) sent its share of it out of step enough to move the phase's
# rates and the load the others met: the merged phase is incomplete, and no conclusion rests on it.
DISTORTED_MS = 250.0


def skew_ms(offset_ms: float | None, uncertainty_ms: float | None) -> float:
    """A shard's measured clock offset (the reference's wall clock − its own) where it is known to exceed both
    its uncertainty and SKEW_MS; 0 otherwise (a slow reference makes a long round trip and an offset that
    means nothing: then the wall clocks, NTP-synchronised, are trusted)."""
    offset, uncertainty = offset_ms or 0.0, uncertainty_ms or 0.0
    return offset if abs(offset) > uncertainty + SKEW_MS else 0.0
SKEW_MS = 10.0  # a shard whose clock is off the coordinator's by more than this (beyond the uncertainty) is named
PHASE_SLACK_S = 5.0  # shards by hand: the pause planned after each phase's schedule for its last answers to end


@dataclass(frozen=True, slots=True)
class Shard:
    index: int  # 0-based, as Kubernetes' JOB_COMPLETION_INDEX
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`i/N`, 0 ≤ i < N; ValueError naming what is wrong."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise ValueError(f"{text!r}: expected i/N, e.g. 0/4 (0-based)")
        index, count = int(match[1]), int(match[2])
        if not 0 <= index < count:
            raise ValueError(f"{text!r}: the index must be 0 to {count - 1}" if count else f"{text!r}: N must be ≥ 1")
        return cls(index, count)

    def indices(self, n: int) -> range:
        """This shard's share of n items."""
        return range(self.index, n, self.count)

    def run_id(self, scenario: str, start_at: float) -> str:
        """The run id every shard of one run derives alike, so their request ids and prompts match one
        run's."""
        return f"{zlib.crc32(f'{scenario}/{start_at!r}/{self.count}'.encode()):08x}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_plan(plan: PhasePlan, shard: Shard) -> PhasePlan:
    """`shard`'s part of one phase's plan."""
    if shard.count == 1:
        return plan
    i, n = shard.index, shard.count
    if isinstance(plan, OpenLoopPlan):
        cap = None if plan.max_in_flight is None else max(1, len(range(i, plan.max_in_flight, n)))
        share = LazySpecs(plan.specs.__getitem__, range(i, len(plan.specs), n))  # built only when asked for
        return replace(plan, specs=share, offsets_ns=plan.offsets_ns[i::n], max_in_flight=cap)
    if isinstance(plan, BatchPlan):
        return BatchPlan([b[i::n] for b in plan.batches])  # empty shares kept: every shard keeps each barrier
    if isinstance(plan, ClosedLoopPlan):
        # Users are the unit: shard i runs users i, i+N, … and the requests whose index modulo the concurrency
        # is one of them, so each shard's requests last as long as its users need (3 users over 2 shards: 2 +
        # 1 users, 2/3 + 1/3 of the requests). Fewer users than shards: the shards past them run nothing.
        users = tuple(range(i, plan.concurrency, n))
        if not users:
            return replace(plan, concurrency=0, requests=0)
        c = plan.concurrency
        requests = None if plan.requests is None else sum(len(range(u, plan.requests, c)) for u in users)
        return replace(plan, concurrency=len(users), requests=requests, users=users, period=c)
    if isinstance(plan, SessionPlan):
        return replace(plan, offsets_ns=plan.offsets_ns[i::n], conversations=range(i, len(plan.offsets_ns), n))
    raise TypeError(f"no sharding for {type(plan).__name__}")


def share_count(plan: PhasePlan) -> int | None:
    """Requests a plan sends (None: a phase bound by time, or sessions, has no count up front)."""
    if isinstance(plan, OpenLoopPlan | BatchPlan):
        return len(plan.specs)
    if isinstance(plan, ClosedLoopPlan) and plan.requests is not None:
        return plan.requests
    return None


def shares(plans: list[PhasePlan], shard: Shard) -> list[int | None]:
    """Requests `shard` is to send in each of the phases planned whole as `plans` (None: bound by time)."""
    return [share_count(shard_plan(whole, shard)) for whole in plans]


def empty(plan: PhasePlan) -> bool:
    """A plan that sends nothing (a shard's share of fewer users, batch members or requests than shards)."""
    if isinstance(plan, OpenLoopPlan):
        return len(plan.specs) == 0
    if isinstance(plan, BatchPlan):
        return not any(plan.batches)
    if isinstance(plan, ClosedLoopPlan):
        return plan.concurrency == 0
    return len(plan.offsets_ns) == 0


def _split(plan: PhasePlan) -> tuple[int, str]:
    """What a plan is split by, and how many of it there are."""
    if isinstance(plan, ClosedLoopPlan):
        return plan.concurrency, "users"
    if isinstance(plan, BatchPlan):
        return max(map(len, plan.batches), default=0), "requests a batch"
    if isinstance(plan, SessionPlan):
        return len(plan.offsets_ns), "conversations"
    return len(plan.specs), "requests"


def idle_line(name: str, plan: PhasePlan, count: int, who: str = "shard") -> str | None:
    """Said before a split run starts when some of its `count` shards have no share of phase `name` (3 users
    over 4 shards): which idle there, and that the run is complete without them. None when every shard has a
    share."""
    idle = [i for i in range(count) if empty(shard_plan(plan, Shard(i, count)))]
    if not idle or count == 1:
        return None
    n, units = _split(plan)
    whom = f"{who} {idle[0]}" if len(idle) == 1 else f"{who}s {', '.join(map(str, idle))}"
    return (f"phase {name}: {n} {units} over {count} {who}s: {whom} {'idles' if len(idle) == 1 else 'idle'} in it "
            "(nothing of the load is lost)")


def planned_span_s(plan: PhasePlan) -> float | None:
    """How long a phase's schedule lasts whatever the server does (its last arrival, or its duration); None
    where only the answers end it (fixed batches, a closed loop of a count of requests). Of the whole plan,
    not a shard's: every shard must derive the same timetable."""
    if isinstance(plan, OpenLoopPlan | SessionPlan):
        return float(plan.offsets_ns[-1]) / 1e9 if len(plan.offsets_ns) else 0.0
    if isinstance(plan, ClosedLoopPlan) and plan.requests is None and plan.duration_ns is not None:
        return plan.duration_ns / 1e9
    return None


def timetable(start_at: float, spans: list[float | None], slack_s: float) -> list[float | None]:
    """Shards by hand (no coordinator to hold a barrier): when each phase starts, Unix seconds — the common
    start, then each phase's schedule and `slack_s` for its last answers later (k6's scenario startTime). None
    from the phase after one whose end nobody can plan: from there each shard starts a phase when its own
    share ended."""
    starts: list[float | None] = [start_at]
    for span in spans[:-1]:
        last = starts[-1]
        starts.append(None if last is None or span is None else last + span + slack_s)
    return starts
