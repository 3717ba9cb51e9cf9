"""Where a capacity search starts and how long it will take, known before its first trial when its target is
simulated (the bundled simulator, or a twin of the endpoint): a coarse search in virtual time estimates the
capacity, and the search itself, run once in virtual time from that estimate, is its plan — the same trials
in the same order, each as long as the real one will be (settling included), plus what a real trial costs
beyond its arrivals."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from harness.config.scenario import Scenario
from harness.devices.catalogue import catalogue
from harness.stats.capacity import Capacity
from harness.tools.predict import predict_async
from harness.tools.search import Trial

# Beyond its window (first send to last answer, as the dry run gives it), a real trial costs its start (a
# tokenizer probe, the self-check) and its files (summary, report.html): 0.65 s a trial on the bundled
# simulator (7 trials, 78.2 s in all of which 73.6 s windows; docs/scenarios.md, "SLO search").
TRIAL_OVERHEAD_S = 0.7
ESTIMATE_STEPS = 5  # the coarse search: 2 + 5 trials of one seed …
ESTIMATE_S = 10.0  # … each ≥ 10 s of virtual arrivals
Search = Callable[..., Awaitable[Capacity]]  # harness.tools.search.search with the search's own settings bound


@dataclass(frozen=True, slots=True)
class Plan:
    start_rps: float | None  # the rate the search starts from (None: its bounds)
    whence: str  # where that rate came from
    trials: int | None = None  # the dry run's trials (None: no dry run)
    seconds: float | None = None  # … and how long the real ones will take
    took_s: float = 0.0  # wall time spent estimating and planning


def simulated(scenario: Scenario, bundled: bool) -> str | None:
    """What the search's target is a simulation of, when the harness can run it in virtual time: the bundled
    simulator, or a twin fitted to the endpoint (the scenario's simulator is a fitted device); else None."""
    if bundled:
        return "the bundled simulator"
    device = catalogue().devices.get(scenario.simulator.accelerator)
    if device is not None and device.twin is not None:
        return f"the twin {scenario.simulator.accelerator}"
    return None


def trial_seconds_spent(found: Capacity) -> float:
    """How long `found`'s trials take for real: their windows (sends and last answers) and their overhead."""
    return sum(t.window_s + TRIAL_OVERHEAD_S for t in found.trials)


async def plan(scenario: Scenario, bisect: Search, near: float | None, what: str | None) -> Plan:
    """From --near when given; else, when the target is simulated, from the capacity a coarse virtual search
    finds, and the search itself run once in virtual time from there (its trials and their real length)."""
    if near is not None:
        return Plan(near, "--near")
    if what is None:
        return Plan(None, "the bounds")
    began = time.monotonic()
    virtual: Trial = predict_async
    coarse = await bisect(scenario, virtual, steps=ESTIMATE_STEPS, repeats=1, duration_s=ESTIMATE_S)
    start = coarse.capacity_rps or coarse.at_least_rps
    if start is None:
        return Plan(None, f"the bounds ({what} in virtual time: {coarse.note})", took_s=time.monotonic() - began)
    dry = await bisect(scenario, virtual, start=start)
    return Plan(start, f"{what}'s estimate in virtual time", len(dry.trials), trial_seconds_spent(dry),
                time.monotonic() - began)
