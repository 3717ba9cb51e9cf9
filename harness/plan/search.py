"""Each deployment's capacity at the SLOs: the highest Poisson rate whose requests meet every SLO in the
required share (goodput, DistServe's definition), found by bisection under the deployment's bound.

Fast (the default): deployments taken cheapest first, a few at once on every core; one whose bound cannot
beat the capacity of a deployment no dearer is not simulated (it cannot be on the front); a trial stops as
soon as too many requests have missed for it to pass. Exhaustive: every deployment simulated, every trial
to its end — the reference the fast search is tested against.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.config.simulator import SimulatorConfig
from harness.plan.bound import bound
from harness.plan.space import Deployment
from harness.plan.trial import PlanRequests, Slos, Trial, run_trial

TOLERANCE = 0.03  # the bisection stops when the rate is known within 3%


@dataclass(frozen=True, slots=True)
class Sized:
    deployment: Deployment
    bound: float  # requests/s at most, from the performance model
    capacity: float | None  # requests/s within the SLOs; None: not simulated (pruned by its bound)
    at_capacity: Trial | None  # the last passing trial
    at_target: Trial | None  # a trial at the target rate, when the capacity reaches it
    trials: int


@dataclass(frozen=True, slots=True)
class Job:
    deployment: Deployment
    base: SimulatorConfig
    requests: PlanRequests
    slos: Slos
    bound: float
    fast: bool
    target: float | None


def capacity(job: Job) -> Sized:
    cfg = job.deployment.config(job.base)
    low, high, best, trials = 0.0, job.bound, None, 0
    while high - low > TOLERANCE * high:
        rate = (low + high) / 2
        trial = run_trial(cfg, job.requests, rate, job.slos, give_up=job.fast)
        trials += 1
        if trial.passed:
            low, best = rate, trial
        else:
            high = rate
    at_target = None
    if job.target is not None and low >= job.target:
        at_target = run_trial(cfg, job.requests, job.target, job.slos, give_up=False)
        trials += 1
    return Sized(job.deployment, job.bound, low, best, at_target, trials)


def search(base: SimulatorConfig, candidates: Sequence[Deployment], requests: PlanRequests, slos: Slos, *,
           prices: Mapping[str, float], target: float | None = None, fast: bool = True,
           workers: int | None = None) -> list[Sized]:
    """Every candidate measured or pruned, cheapest first (by $/h with prices, else by devices)."""
    def cost(d: Deployment) -> float:
        return d.cost_per_h(prices) or float(d.devices)

    ordered = sorted(candidates, key=lambda d: (cost(d), d.devices, d.text()))
    bounds = {d: bound(d, base, requests.mean_prompt, requests.mean_output) for d in ordered}
    workers = workers or os.cpu_count() or 1
    # fork: the workers inherit the presets this process read (a fitted twin, custom devices)
    pool = multiprocessing.get_context("fork").Pool(workers) if workers > 1 else None
    done: list[Sized] = []
    try:
        for start in range(0, len(ordered), 2 * workers):
            jobs = []
            for d in ordered[start:start + 2 * workers]:
                if fast and any(cost(m.deployment) <= cost(d) and m.capacity >= bounds[d]
                                for m in done if m.capacity is not None):
                    done.append(Sized(d, bounds[d], None, None, None, 0))  # cannot be on the front
                else:
                    jobs.append(Job(d, base, requests, slos, bounds[d], fast, target))
            done += pool.map(capacity, jobs) if pool is not None else [capacity(j) for j in jobs]
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return done
