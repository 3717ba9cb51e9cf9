"""From a scenario phase to a concrete plan: which requests, and when each is intended. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.clock import NS_PER_S
from harness.config.load import BatchLoad, ConcurrencyLoad, ConstantLoad, GammaLoad, PoissonLoad, RampLoad, TraceLoad
from harness.config.scenario import Scenario
from harness.tokens import make_text
from harness.workload.arrivals import (
    OffsetsNs,
    constant_offsets,
    gamma_offsets,
    poisson_offsets,
    ramp_offsets,
    trace_offsets,
    truncate_to_duration,
)
from harness.workload.requests import RequestSource, RequestSpec, TextMaker
from harness.workload.sessions import ConversationSource, group_sessions
from harness.workload.traces import ColumnMap, Trace, cap_idle, read_trace, rescale, window


@dataclass(frozen=True, slots=True)
class OpenLoopPlan:
    specs: Sequence[RequestSpec]
    offsets_ns: OffsetsNs
    max_in_flight: int | None = None
    trace: dict[str, object] | None = None  # a replayed trace file: its source, rows used and rows skipped


@dataclass(frozen=True, slots=True)
class BatchPlan:
    batches: list[list[RequestSpec]]

    @property
    def specs(self) -> list[RequestSpec]:
        return [s for b in self.batches for s in b]


@dataclass(frozen=True, slots=True)
class ClosedLoopPlan:
    source: RequestSource
    concurrency: int
    requests: int | None  # None: until the duration ends
    duration_ns: int | None
    think_ns: int = 0
    stagger_ns: int = 0
    # A shard runs some of the phase's users and sends the requests whose index modulo the phase's concurrency
    # is one of its users' (the single process's indices, split in proportion to the users: users, not
    # requests, are the unit, so the in-flight total stays the phase's concurrency while every shard sends).
    users: tuple[int, ...] | None = None
    period: int = 1

    def index(self, k: int) -> int:
        """The phase's request index of the k-th request this plan sends."""
        if self.users is None:
            return k
        return (k // len(self.users)) * self.period + self.users[k % len(self.users)]

    def build(self, k: int) -> RequestSpec:
        """The k-th request this plan sends."""
        return self.source.spec(self.index(k))


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """Multi-turn conversations, each starting at its open-loop arrival."""

    source: ConversationSource
    offsets_ns: OffsetsNs
    trace: dict[str, object] | None = None
    conversations: Sequence[int] | None = None  # which conversation each arrival starts (None: 0, 1, 2, …)


PhasePlan = OpenLoopPlan | BatchPlan | ClosedLoopPlan | SessionPlan
OpenLoad = PoissonLoad | GammaLoad | ConstantLoad | RampLoad | TraceLoad


def phase_seed(seed: int, phase_index: int) -> int:
    return int(np.random.SeedSequence([seed, phase_index, 0]).generate_state(1)[0])


def open_loop_offsets(load: OpenLoad, seed: int) -> OffsetsNs:
    if isinstance(load, RampLoad):
        offsets = ramp_offsets(load.start_rate, load.end_rate, load.duration_s,
                               seed if load.process == "poisson" else None)
    elif isinstance(load, TraceLoad):
        offsets = truncate_to_duration(trace_offsets(load.timestamps or [], load.time_scale), load.duration_s)
    else:
        # With only a duration, draw comfortably more arrivals than it can hold, then cut at the end.
        count = load.requests or int(load.rate * (load.duration_s or 0) * 1.5) + 100
        if isinstance(load, PoissonLoad):
            offsets = poisson_offsets(load.rate, count, seed)
        elif isinstance(load, GammaLoad):
            offsets = gamma_offsets(load.rate, load.cv, count, seed)
        else:
            offsets = constant_offsets(load.rate, count)
        offsets = truncate_to_duration(offsets, load.duration_s)
    return offsets[: load.requests] if load.requests is not None else offsets


def text_maker(scenario: Scenario) -> TextMaker:
    """Prompt text for the scenario: the shared word tokenizer, or the model's own when one is given."""
    if scenario.workload.tokenizer in (None, "server", "words"):  # the server's words come with the endpoint
        return make_text
    from harness.workload.tokenizer import HFPromptMaker  # only runs that ask for it pay for the import

    return HFPromptMaker(Path(scenario.workload.tokenizer))


def plan_phase(scenario: Scenario, phase_index: int, run_id: str, text: TextMaker = make_text,
               overhead: int = 0) -> PhasePlan:
    """`overhead`: tokens the server adds around a one-turn prompt, taken off each (--tokenizer server)."""
    phase = scenario.phases[phase_index]
    load = phase.load
    seed = phase_seed(scenario.seed, phase_index)
    if isinstance(load, BatchLoad) and load.pack == "inputs":  # a batch is one request carrying `size` texts
        packed = RequestSource(scenario.workload, phase.name, phase_index, seed, run_id, 1, text=text,
                               overhead=overhead, inputs=load.size)
        return BatchPlan([[spec] for spec in packed.take(load.batches)])
    batch_size = load.size if isinstance(load, BatchLoad) else None
    source = RequestSource(scenario.workload, phase.name, phase_index, seed, run_id, batch_size, text=text,
                           overhead=overhead)
    if isinstance(load, BatchLoad):
        flat = source.take(load.size * load.batches)
        return BatchPlan([flat[i:i + load.size] for i in range(0, len(flat), load.size)])
    if isinstance(load, ConcurrencyLoad):
        duration = None if load.duration_s is None else int(load.duration_s * NS_PER_S)
        return ClosedLoopPlan(source, load.concurrency, load.requests, duration, int(load.think_s * NS_PER_S),
                              int(load.stagger_s * NS_PER_S))
    if scenario.workload.sessions is not None:
        return _session_plan(scenario, load, source, seed)
    if isinstance(load, TraceLoad) and load.file is not None:
        trace, info = replay_trace(load)
        rows = tuple(trace.rows)
        offsets = trace_offsets([r.arrival_s for r in rows])
        source = RequestSource(scenario.workload, phase.name, phase_index, seed, run_id, rows=rows, text=text,
                               overhead=overhead)
        return OpenLoopPlan(source.lazy(len(rows)), offsets, phase.max_in_flight, info)
    offsets = open_loop_offsets(load, seed)
    return OpenLoopPlan(source.lazy(len(offsets)), offsets, phase.max_in_flight)


def _session_plan(scenario: Scenario, load: object, source: RequestSource, seed: int) -> SessionPlan:
    sessions = scenario.workload.sessions
    assert sessions is not None and isinstance(load, OpenLoad)  # validated with the scenario
    if isinstance(load, TraceLoad) and load.file is not None:
        trace, info = replay_trace(load)
        groups = group_sessions(trace.rows)
        offsets = trace_offsets([g[0].arrival_s for g in groups])
        return SessionPlan(ConversationSource(source, sessions, tuple(groups)), offsets, info)
    return SessionPlan(ConversationSource(source, sessions), open_loop_offsets(load, seed))


def replay_trace(load: TraceLoad) -> tuple[Trace, dict[str, object]]:
    """The trace file of a phase, windowed, sped up or rescaled, idle gaps capped, cut to its duration and
    request limit; and what summary.json says of it (source, rows, rows skipped, gaps capped, rate)."""
    assert load.file is not None
    c = load.columns
    trace = read_trace(Path(load.file), load.format, skip_bad=load.skip_bad_rows, model=load.model,
                       columns=ColumnMap(c.time, c.input, c.output, c.time_unit, c.session))
    trace = window(trace, load.start_s, load.end_s, None, load.time_scale)
    capped, cut_s = 0, 0.0
    if load.max_idle_s is not None:
        trace, capped, cut_s = cap_idle(trace, load.max_idle_s)
    if load.target_rate is not None:
        trace = rescale(trace, load.target_rate, load.duration_s)
    rows = [r for r in trace.rows if load.duration_s is None or r.arrival_s < load.duration_s]
    rows = rows[: load.requests] if load.requests else rows
    span = load.duration_s or (rows[-1].arrival_s if rows else 0.0)
    info: dict[str, object] = {"source": trace.source, "rows": len(rows), "skipped": dict(trace.skipped),
                               "offered_rate": len(rows) / span if span > 0 else None}
    if load.max_idle_s is not None:
        info["idle_capped"] = {"max_idle_s": load.max_idle_s, "gaps": capped, "seconds_removed": round(cut_s, 3)}
    return Trace(trace.source, rows, trace.skipped), info


def plan_trace(plan: PhasePlan) -> dict[str, object] | None:
    """What summary.json says of the trace a phase replays, if it replays one."""
    return plan.trace if isinstance(plan, OpenLoopPlan | SessionPlan) else None


def peak_connections(plan: PhasePlan) -> int:
    """Connections the phase may hold open at once: the pool is sized to it, never aiohttp's 100."""
    if isinstance(plan, BatchPlan):
        return max(len(b) for b in plan.batches)
    if isinstance(plan, ClosedLoopPlan):
        return plan.concurrency
    if isinstance(plan, SessionPlan):
        return max(1, len(plan.offsets_ns))
    return max(1, min(len(plan.specs), plan.max_in_flight or len(plan.specs)))


WARM_OPEN_LOOP = 256  # an open loop's peak is every request it sends: its in-flight level is unknown ahead
WARM_MAX = 4096


def warm_connections(plan: PhasePlan) -> int:
    """Connections to open before the phase's clock starts: every one a batch or a closed loop will hold at
    once (opened mid-phase, a thousand handshakes at the start of a 1,024-stream batch cost its TTFT tail a
    second of dropped SYNs); for open loops a pool that covers a typical in-flight level."""
    peak = peak_connections(plan)
    if isinstance(plan, BatchPlan | ClosedLoopPlan):
        return min(peak, WARM_MAX)
    return min(peak, WARM_OPEN_LOOP)
