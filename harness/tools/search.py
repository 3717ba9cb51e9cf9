"""`harness search`: the highest arrival rate whose goodput still meets the SLOs.

Bisection over the Poisson rate of one phase: each trial runs the scenario's workload at a rate and
asks whether at least `goodput` of its requests met every SLO. The boundary is then tried again
with other seeds, so the capacity comes with an interval rather than one lucky number. Trials run
against the endpoint, or in virtual time on the scenario's simulated accelerator (`predict`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from harness.config.scenario import SLO, Scenario, parse_scenario

Trial = Callable[[Scenario], Awaitable[dict[str, Any]]]
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


def _trial_record(summary: dict[str, Any], rate: float, seed: int, min_requests: int) -> dict[str, Any]:
    (phase,) = summary["phases"]
    measured = phase["requests"]["total"]
    return {"rate": rate, "seed": seed, "goodput": phase["goodput"]["fraction"], "requests": measured,
            "too_small": measured < min_requests, "output_tokens_per_s": phase["throughput"]["output_tokens_per_s"]}


class SearchStopped(Exception):
    """A trial was stopped (Ctrl-C, SIGTERM): no capacity can be claimed from it; `trials` are those that ended."""

    def __init__(self, trials: list[dict[str, Any]]) -> None:
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
                 said: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Bisect [low, high] for the highest rate whose goodput share is ≥ `goodput`, then repeat the boundary.

    A trial whose window held fewer than `min_requests` requests (a run cut short, a long warm-up) is kept
    but marked too small to decide, and counts as missing the SLOs: capacity is never claimed on a few. A trial
    that was stopped raises `SearchStopped`: a cut trial decides nothing. `said` hears of each trial as it ends.
    """
    trials: list[dict[str, Any]] = []

    async def meets(rate: float, seed: int) -> bool:
        summary = await trial(trial_scenario(base, rate, duration_s, seed, slo, min_requests))
        if (summary.get("run") or {}).get("stopped"):
            raise SearchStopped(trials)
        trials.append(_trial_record(summary, rate, seed, min_requests))
        if said is not None:
            said(trials[-1])
        return bool(trials[-1]["goodput"] >= goodput) and not trials[-1]["too_small"]

    if not await meets(low, base.seed):
        return {"capacity_rps": None, "interval_rps": None, "trials": trials,
                "note": f"even {low:g} req/s misses the SLOs"}
    lo, hi = low, high
    if await meets(high, base.seed):
        return {"capacity_rps": None, "interval_rps": None, "trials": trials, "at_least_rps": high,
                "note": f"the highest rate tried, {high:g} req/s, still meets the SLOs: capacity ≥ {high:g} req/s "
                        "(raise --high to find it)"}
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
    return {"capacity_rps": float(arr.mean()), "interval_rps": [float(arr.mean() - half), float(arr.mean() + half)],
            "per_seed_rps": [float(x) for x in arr], "trials": trials}
