"""The simulator keeping its steps on time while it parses requests and renders scrapes (issue 67): the gate
that holds work near a step's deadline, the clock that naps instead of trusting one long timer, a scrape
rendered between steps. Fakes only: the figures are in bench/ (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import gc

import numpy as np
import pytest

from harness import clock as clock_module
from harness.clock import NS_PER_MS, FakeClock, MonotonicClock
from harness.sim.engine import SimRequest, StepAccount
from harness.sim.metrics import SimMetrics
from harness.sim.realtime import Snapshot, StepGate


async def test_work_near_a_steps_deadline_waits_for_the_step_and_no_longer() -> None:
    clock = FakeClock()
    gate = StepGate(clock)
    await asyncio.wait_for(gate.clear(NS_PER_MS), 1)  # no step under way: at once
    gate.due(clock.now_ns() + 5 * NS_PER_MS)
    assert gate.near(6 * NS_PER_MS) and not gate.near(5 * NS_PER_MS)
    await asyncio.wait_for(gate.clear(4 * NS_PER_MS), 1)  # ends before the deadline: at once
    waiting = asyncio.ensure_future(gate.clear(6 * NS_PER_MS))
    released: list[str] = []
    gate.after(lambda: released.append("bytes"))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done() and not released
    gate.ended()
    gate.due(clock.now_ns())  # the next step, due at once: what waited for the last one does not wait again
    await asyncio.wait_for(waiting, 1)
    await asyncio.sleep(0)
    assert released == ["bytes"]


@pytest.mark.parametrize("nap_ms", [None, 1])
async def test_a_napping_clock_wakes_within_a_nap(monkeypatch: pytest.MonkeyPatch, nap_ms: int | None) -> None:
    """Each timer the clock sets is at most a nap ahead (uvloop can fire one late by the callbacks run before
    its poll, up to how far ahead it was set); without a nap, one timer and the spin, as the harness sleeps."""
    now, timers = [0], []
    spin = asyncio.sleep

    async def timer(seconds: float) -> None:
        if seconds:
            timers.append(seconds)
        now[0] += int(seconds * 1e9) + 1_000
        await spin(0)

    monkeypatch.setattr(clock_module.time, "monotonic_ns", lambda: now[0])
    monkeypatch.setattr(clock_module.asyncio, "sleep", timer)
    await MonotonicClock(None if nap_ms is None else nap_ms * NS_PER_MS).sleep_until(20 * NS_PER_MS)
    assert now[0] >= 20 * NS_PER_MS
    if nap_ms is None:
        assert timers == [pytest.approx(0.0185)]
    else:
        assert len(timers) >= 18 and max(timers) <= nap_ms / 1e3


def _busy_metrics() -> tuple[SimMetrics, Snapshot]:
    metrics = SimMetrics("m")
    for i in range(20):
        req = SimRequest(f"r{i}", 100, 4, 0)
        req.token_ns = [int(t) for t in np.cumsum(np.full(4, 7_000_000)) + i]
        req.finished, req.scheduled_ns = True, 1_000
        metrics.observe_tokens(req, 0)
        metrics.observe_ended(req, req.token_ns[-1])
    return metrics, Snapshot(3, 1, 0.25, 0, 10, 5, 80, 2000, StepAccount(memory_bound_s=1.0), (1e12, 1e15))


async def test_a_scrape_rendered_between_steps_says_what_one_rendering_says() -> None:
    metrics, snap = _busy_metrics()
    whole = metrics.render(snap)
    gate = StepGate(FakeClock())
    assert await asyncio.wait_for(metrics.render_between_steps(snap, gate), 1) == whole
    gate.due(0)  # a step due now: the rendering waits for its end, then says the same
    rendering = asyncio.ensure_future(metrics.render_between_steps(snap, gate))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not rendering.done()
    gate.ended()
    assert await asyncio.wait_for(rendering, 1) == whole


@pytest.mark.parametrize("early", [True, False])
def test_young_objects_are_collected_as_a_step_starts_with_time_to_spare(early: bool) -> None:
    threshold = gc.get_threshold()
    gc.set_threshold(1_000_000, *threshold[1:])  # no collection of its own during the test
    try:
        clock = FakeClock()
        gate = StepGate(clock, early_gc=early)
        held = [[i] for i in range(5_000)]  # young containers, alive: counted until a collection
        gate.due(clock.now_ns() + NS_PER_MS)  # too little time ahead: not now
        assert gc.get_count()[0] >= 5_000
        gate.due(clock.now_ns() + 10 * NS_PER_MS)
        assert (gc.get_count()[0] < 5_000) == early and len(held) == 5_000
    finally:
        gc.set_threshold(*threshold)
