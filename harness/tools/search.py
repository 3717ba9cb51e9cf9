"""`harness search`: the highest arrival rate whose goodput still meets the SLOs.

Bisection over the Poisson rate of one phase: each trial runs the scenario's workload at a rate and
asks whether at least `goodput` of its requests met every SLO. The boundary is then tried again
with other seeds, so the capacity comes with an interval rather than one lucky number. Trials run
against the endpoint, or in virtual time on the scenario's simulated accelerator (`predict`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.config.scenario import SLO, Scenario, parse_scenario
from harness.stats.schema import Summary

Trial = Callable[[Scenario], Awaitable[Summary]]
# A trial decides "≥ 95% goodput" on its own requests: with 20, one miss flips it; with 50, three do.
MIN_REQUESTS = 50


_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


def parse_slo(text: str) -> SLO:
    """`ttft=500ms,tpot=50ms` (units ms or s) into per-request limits; a bad item raises ValueError naming it.

    `ttft_p99=…` reads the same: the limit holds per request, and the goodput share says at which percentile
    (a goodput of 0.99 is a p99 SLO).
    """
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        name = _KEYS.get(key.removesuffix("_p99"))
        if not sep or name is None:
            raise ValueError(f"{item!r}: expected ttft=…, tpot=… or e2e=…")
        scale = 1e3 if raw.endswith("s") and not raw.endswith("ms") else 1.0
        try:
            values[name] = float(raw.removesuffix("ms").removesuffix("s")) * scale
        except ValueError:
            raise ValueError(f"{item!r}: not a duration (use 500ms or 0.5s)") from None
    if not values:
        raise ValueError("give at least one SLO")
    return SLO(**values)


def trial_scenario(base: Scenario, rate: float, duration_s: float, seed: int, slo: SLO,
                   min_requests: int = MIN_REQUESTS) -> Scenario:
    """One trial: `duration_s` of Poisson arrivals at `rate`, but never fewer than `min_requests` requests."""
    data = base.model_dump(mode="json")
    data["seed"] = seed
    data["slo"] = slo.model_dump()
    requests = max(min_requests, math.ceil(rate * duration_s))
    data["phases"] = [{"name": f"rate={rate:.3g}", "load": {"type": "poisson", "rate": rate, "requests": requests}}]
    return parse_scenario(data, "search")


@dataclass(frozen=True, slots=True)
class SearchTrial:
    """One trial as the search saw it: its rate and seed, and what its one phase delivered."""

    rate: float
    seed: int
    goodput: float
    requests: int
    too_small: bool  # fewer requests in its window than the search asks to decide on
    output_tokens_per_s: float

    @classmethod
    def of(cls, summary: Summary, rate: float, seed: int, min_requests: int) -> SearchTrial:
        (phase,) = summary.phases
        measured = phase.requests.total
        return cls(rate, seed, phase.goodput.fraction, measured, measured < min_requests,
                   phase.throughput.output_tokens_per_s)


@dataclass(frozen=True, slots=True)
class Capacity:
    """What the search found: the capacity with its interval over seeds, or why it found none."""

    capacity_rps: float | None
    interval_rps: tuple[float, float] | None
    trials: list[SearchTrial] = field(default_factory=list)
    per_seed_rps: list[float] | None = None
    at_least_rps: float | None = None  # the highest rate tried still met the SLOs
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        """As `harness search --json` prints it: the optional parts only when they say something."""
        out = {k: v for k, v in asdict(self).items() if v is not None or k in ("capacity_rps", "interval_rps")}
        return {**out, "interval_rps": None if self.interval_rps is None else list(self.interval_rps)}


class SearchStopped(Exception):
    """A trial was stopped (Ctrl-C, SIGTERM): no capacity can be claimed from it; `trials` are those that ended."""

    def __init__(self, trials: list[SearchTrial]) -> None:
        super().__init__("stopped during a trial")
        self.trials = trials


def planned_trials(steps: int, repeats: int) -> int:
    """Trials at most: the low and the high bound, the bisection, and the boundary again for each other seed."""
    return 2 + steps + (repeats - 1) * max(3, steps // 2)


def trial_seconds(rate: float, duration_s: float, min_requests: int = MIN_REQUESTS) -> float:
    """How long a trial's arrivals last at least: its duration, or longer to send `min_requests` at a low rate."""
    return max(duration_s, min_requests / rate)


async def search(base: Scenario, trial: Trial, slo: SLO, goodput: float, low: float, high: float,
                 duration_s: float, steps: int = 7, repeats: int = 3, *,
                 min_requests: int = MIN_REQUESTS,
                 said: Callable[[SearchTrial], None] | None = None) -> Capacity:
    """Bisect [low, high] for the highest rate whose goodput share is ≥ `goodput`, then repeat the boundary.

    A trial whose window held fewer than `min_requests` requests (a run cut short, a long warm-up) is kept
    but marked too small to decide, and counts as missing the SLOs: capacity is never claimed on a few. A trial
    that was stopped raises `SearchStopped`: a cut trial decides nothing. `said` hears of each trial as it ends.
    """
    trials: list[SearchTrial] = []

    async def meets(rate: float, seed: int) -> bool:
        summary = await trial(trial_scenario(base, rate, duration_s, seed, slo, min_requests))
        if summary.run.stopped:
            raise SearchStopped(trials)
        trials.append(SearchTrial.of(summary, rate, seed, min_requests))
        if said is not None:
            said(trials[-1])
        return trials[-1].goodput >= goodput and not trials[-1].too_small

    if not await meets(low, base.seed):
        return Capacity(None, None, trials, note=f"even {low:g} req/s misses the SLOs")
    lo, hi = low, high
    if await meets(high, base.seed):
        return Capacity(None, None, trials, at_least_rps=high,
                        note=f"the highest rate tried, {high:g} req/s, still meets the SLOs: capacity ≥ {high:g} "
                             "req/s (raise --high to find it)")
    for _ in range(steps):
        mid = (lo + hi) / 2
        if await meets(mid, base.seed):
            lo = mid
        else:
            hi = mid
    # Re-run the boundary with other seeds: each seed's arrivals differ, so does its capacity.
    found = [lo]
    for k in range(1, repeats):
        r_lo, r_hi = lo * 0.8, min(hi * 1.1, high)
        for _ in range(max(3, steps // 2)):
            mid = (r_lo + r_hi) / 2
            if await meets(mid, base.seed + k):
                r_lo = mid
            else:
                r_hi = mid
        found.append(r_lo)
    arr = np.asarray(found)
    half = 1.96 * arr.std(ddof=1) / np.sqrt(len(arr)) if len(arr) > 1 else 0.0
    return Capacity(float(arr.mean()), (float(arr.mean() - half), float(arr.mean() + half)), trials,
                    per_seed_rps=[float(x) for x in arr])
