"""From a scenario phase to a concrete plan: which requests, and when each is intended. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.arrivals import OffsetsNs, constant_offsets, gamma_offsets, poisson_offsets, truncate_to_duration
from harness.scenario import BatchLoad, ConcurrencyLoad, ConstantLoad, GammaLoad, Phase, PoissonLoad, Scenario
from harness.workload import RequestSpec, build_requests


@dataclass(frozen=True, slots=True)
class OpenLoopPlan:
    specs: list[RequestSpec]
    offsets_ns: OffsetsNs


@dataclass(frozen=True, slots=True)
class BatchPlan:
    batches: list[list[RequestSpec]]

    @property
    def specs(self) -> list[RequestSpec]:
        return [s for b in self.batches for s in b]


@dataclass(frozen=True, slots=True)
class ClosedLoopPlan:
    specs: list[RequestSpec]
    concurrency: int
    think_ns: int = field(default=0)


PhasePlan = OpenLoopPlan | BatchPlan | ClosedLoopPlan


def phase_seed(seed: int, phase_index: int) -> int:
    return int(np.random.SeedSequence([seed, phase_index, 0]).generate_state(1)[0])


def _open_loop_offsets(load: PoissonLoad | GammaLoad | ConstantLoad, seed: int) -> OffsetsNs:
    # With only a duration, draw comfortably more arrivals than it can hold, then cut at the end.
    count = load.requests or int(load.rate * (load.duration_s or 0) * 1.5) + 100
    if isinstance(load, PoissonLoad):
        offsets = poisson_offsets(load.rate, count, seed)
    elif isinstance(load, GammaLoad):
        offsets = gamma_offsets(load.rate, load.cv, count, seed)
    else:
        offsets = constant_offsets(load.rate, count)
    return truncate_to_duration(offsets, load.duration_s)


def plan_phase(scenario: Scenario, phase_index: int, run_id: str) -> PhasePlan:
    phase: Phase = scenario.phases[phase_index]
    load = phase.load
    seed = phase_seed(scenario.seed, phase_index)

    def specs(count: int, batch_size: int | None = None) -> list[RequestSpec]:
        return build_requests(scenario.workload, phase.name, phase_index, count, seed, run_id, batch_size)

    if isinstance(load, BatchLoad):
        flat = specs(load.size * load.batches, load.size)
        return BatchPlan([flat[i:i + load.size] for i in range(0, len(flat), load.size)])
    if isinstance(load, ConcurrencyLoad):
        return ClosedLoopPlan(specs(load.requests), load.concurrency, int(load.think_time_ms * 1e6))
    offsets = _open_loop_offsets(load, seed)
    return OpenLoopPlan(specs(len(offsets)), offsets)


def peak_connections(plan: PhasePlan) -> int:
    """Connections the phase may hold open at once: the pool is sized to it, never aiohttp's 100."""
    if isinstance(plan, BatchPlan):
        return max(len(b) for b in plan.batches)
    if isinstance(plan, ClosedLoopPlan):
        return plan.concurrency
    return max(1, len(plan.specs))
