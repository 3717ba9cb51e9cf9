"""Which pacer a phase's plan takes, by the plan's own type: a new load shape is one entry here (and its pacer),
not another branch of an isinstance chain."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from harness.records import RequestRecord
from harness.run.dispatch import Dispatcher
from harness.run.pacers.batches import Barrier
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan, SessionPlan


async def run_plan(dispatcher: Dispatcher, plan: PhasePlan, grace_s: float,
                   barrier: Barrier | None = None) -> list[RequestRecord]:
    """One phase's plan through its pacer, chosen by the plan's own type (`barrier`: before each batch after the
    first, a sharded run's wait for every shard's share of the batches before it)."""
    return await _PACED[type(plan)](dispatcher, plan, grace_s, barrier)


async def _batches(d: Dispatcher, plan: BatchPlan, grace_s: float, barrier: Barrier | None) -> list[RequestRecord]:
    return await d.fixed_batch(plan.batches, grace_s, barrier)


async def _users(d: Dispatcher, plan: ClosedLoopPlan, grace_s: float, _: Barrier | None) -> list[RequestRecord]:
    return await d.closed_loop(plan.build, plan.requests, plan.concurrency, plan.think_ns, plan.duration_ns,
                               grace_s, plan.stagger_ns)


async def _conversations(d: Dispatcher, plan: SessionPlan, grace_s: float, _: Barrier | None) -> list[RequestRecord]:
    return await d.sessions(plan.source, plan.offsets_ns.tolist(), grace_s, plan.conversations)


async def _arrivals(d: Dispatcher, plan: OpenLoopPlan, grace_s: float, _: Barrier | None) -> list[RequestRecord]:
    return await d.open_loop(plan.specs, plan.offsets_ns.tolist(), plan.max_in_flight, grace_s)


_PACED: dict[type, Callable[..., Awaitable[list[RequestRecord]]]] = {
    BatchPlan: _batches, ClosedLoopPlan: _users, SessionPlan: _conversations, OpenLoopPlan: _arrivals}
