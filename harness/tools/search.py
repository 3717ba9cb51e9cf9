"""`harness search`: the highest arrival rate whose goodput still meets the SLOs.

Bisection over the Poisson rate of one phase: each trial runs the scenario's workload at a rate and
asks whether at least `goodput` of its requests met every SLO. From an estimate (`start`: the simulator's own
in virtual time, or the user's `--near`), the first trials bracket it — up or down by half again — before
the bisection; without one, the search's low and high bounds do. The boundary is then tried again with other
seeds, so the capacity comes with an interval rather than one lucky number. Trials run against the endpoint,
or in virtual time on the scenario's simulated accelerator (`predict`). A capacity resting mostly on trials
the client could have moved (client-limited) is reported but not claimed.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import ValidationError

from harness.config.base import first_error
from harness.config.metric_registry import SLO_LATENCIES
from harness.config.scenario import SLO, Scenario, parse_scenario
from harness.config.units import duration_seconds
from harness.stats.capacity import Capacity, SearchTrial
from harness.stats.schema import Summary
from harness.voice import QUIET, Voice

Trial = Callable[[Scenario], Awaitable[Summary]]
# A trial decides "≥ 95% goodput" on its own requests: with 20, one miss flips it; with 50, three do.
MIN_REQUESTS = 50
# A trial shorter than a few E2E times ends before its queue has built: 6 s trials found 61 req/s where 20 s
# trials found 48.6 (issue 42). Trials last at least this many times the longest E2E p99 a passing trial saw.
SETTLE_E2E = 8
GROW = 1.5  # from an estimate, the first trials step up or down by this until they straddle the boundary


_KEYS = {latency.value: key for key, latency in SLO_LATENCIES}


def parse_slo(text: str) -> SLO:
    """`ttft=500ms,tpot=50ms` (units ms or s; ttft_answer: the answer's first token after any thinking) into
    per-request limits; a bad item raises ValueError naming it.

    `ttft_p99=…` reads the same: the limit holds per request, and the goodput share says at which percentile
    (a goodput of 0.99 is a p99 SLO).
    """
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        name = _KEYS.get(key.removesuffix("_p99"))
        if not sep or name is None:
            raise ValueError(f"{item!r}: expected one of {', '.join(f'{k}=…' for k in _KEYS)}")
        try:  # `nan`, `inf` and `1e400ms` were taken by float() and reached pydantic's multi-line error
            values[name] = duration_seconds(raw, "ms") * 1e3
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if not values:
        raise ValueError("give at least one SLO")
    try:
        return SLO(**values)
    except ValidationError as exc:
        raise ValueError(first_error(exc)) from None


def trial_scenario(base: Scenario, rate: float, duration_s: float, seed: int, slo: SLO,
                   min_requests: int = MIN_REQUESTS) -> Scenario:
    """One trial: `duration_s` of Poisson arrivals at `rate`, but never fewer than `min_requests` requests."""
    data = base.model_dump(mode="json")
    data["seed"] = seed
    data["slo"] = slo.model_dump()
    requests = max(min_requests, math.ceil(rate * duration_s))
    data["phases"] = [{"name": f"rate={rate:.3g}", "load": {"type": "poisson", "rate": rate, "requests": requests}}]
    return parse_scenario(data, "search")


class SearchStopped(Exception):
    """A trial was stopped (Ctrl-C, SIGTERM): no capacity can be claimed from it; `trials` are those that
    ended."""

    def __init__(self, trials: list[SearchTrial]) -> None:
        super().__init__("stopped during a trial")
        self.trials = trials


def planned_trials(steps: int, repeats: int) -> int:
    """Trials at most: the low and the high bound, the bisection, and the boundary again for each other
    seed."""
    return 2 + steps + (repeats - 1) * max(3, steps // 2)


def trial_seconds(rate: float, duration_s: float, min_requests: int = MIN_REQUESTS) -> float:
    """How long a trial's arrivals last at least: its duration, or longer to send `min_requests` at a low
    rate."""
    return max(duration_s, min_requests / rate)


def settled_seconds(duration_s: float, trial: SearchTrial) -> float:
    """How long trials must last after `trial`: at least `SETTLE_E2E` × its E2E p99 when it passed (a failing
    trial's E2E is its growing queue's, no measure of a settled one)."""
    if not trial.met or trial.e2e_p99_ms is None:
        return duration_s
    return max(duration_s, math.ceil(SETTLE_E2E * trial.e2e_p99_ms / 1e3))


@dataclass
class _Trials:
    """The trials of one search, run in order; each decides whether its rate meets the SLOs."""

    base: Scenario
    trial: Trial
    slo: SLO
    goodput: float
    length: float  # seconds of arrivals a trial lasts at least (raised by `settled_seconds`)
    min_requests: int
    said: Callable[[SearchTrial], None] | None
    voice: Voice
    done: list[SearchTrial] = field(default_factory=list)

    async def meets(self, rate: float, seed: int) -> bool:
        summary = await self.trial(trial_scenario(self.base, rate, self.length, seed, self.slo, self.min_requests))
        if summary.run.stopped:
            raise SearchStopped(self.done)
        last = SearchTrial.of(summary, rate, seed, self.min_requests, index=len(self.done) + 1, goodput=self.goodput,
                              seconds=trial_seconds(rate, self.length, self.min_requests))
        self.done.append(last)
        if self.said is not None:
            self.said(last)
        if (longer := settled_seconds(self.length, last)) > self.length:
            self.length = longer
            self.voice.say(f"trials now last ≥ {longer:g} s: {SETTLE_E2E}× the E2E p99 of {last.e2e_p99_ms:,.0f} ms "
                           f"trial {last.index} saw (a shorter trial ends before its queue builds)")
        return last.met


async def search(base: Scenario, trial: Trial, slo: SLO, goodput: float, low: float, high: float,
                 duration_s: float, steps: int = 7, repeats: int = 3, *,
                 min_requests: int = MIN_REQUESTS, start: float | None = None,
                 said: Callable[[SearchTrial], None] | None = None,
                 voice: Voice = QUIET) -> Capacity:
    """The highest rate in [low, high] whose goodput share is ≥ `goodput`: bracketed from `start` (or from the
    bounds), bisected to the precision `steps` halvings of [low, high] give, then the boundary again per seed.

    A trial whose window held fewer than `min_requests` requests (a run cut short, a long warm-up) is kept but
    marked too small to decide, and counts as missing the SLOs: capacity is never claimed on a few. A trial
    that was stopped raises `SearchStopped`: a cut trial decides nothing. `said` hears of each trial as it
    ends; `voice`, of trials made longer (`settled_seconds`).
    """
    run = _Trials(base, trial, slo, goodput, duration_s, min_requests, said, voice)
    found = await (_bounds(run, low, high) if start is None else _bracket(run, start, low, high))
    if isinstance(found, str):  # nothing to bisect: the whole range passes, or none of it does
        return Capacity(None, None, run.done, at_least_rps=high if found == "high" else None,
                        note=_beyond(low, high, found), trial_s=run.length, start_rps=start)
    lo, hi = found
    target = (high - low) / 2 ** steps  # the precision `steps` halvings of the whole range give
    lo, hi = await _bisect(run, lo, hi, base.seed, max(1, math.ceil(math.log2(max((hi - lo) / target, 1.0)))))
    # Re-run the boundary with other seeds: each seed's arrivals differ, so does its capacity.
    per_seed = [lo]
    for k in range(1, repeats):
        per_seed.append((await _bisect(run, lo * 0.8, min(hi * 1.1, high), base.seed + k, max(3, steps // 2)))[0])
    arr = np.asarray(per_seed)
    if len(arr) == 1:  # one seed has no spread to give: no interval, rather than one of zero width
        return Capacity(float(arr[0]), None, run.done, per_seed_rps=[float(arr[0])], trial_s=run.length,
                        start_rps=start)
    half = 1.96 * arr.std(ddof=1) / np.sqrt(len(arr))
    return Capacity(float(arr.mean()), (float(arr.mean() - half), float(arr.mean() + half)), run.done,
                    per_seed_rps=[float(x) for x in arr], trial_s=run.length, start_rps=start)


Beyond = Literal["low", "high"]  # the low bound misses the SLOs; the high one still meets them


def _beyond(low: float, high: float, which: Beyond) -> str:
    if which == "low":
        return f"even {low:g} req/s misses the SLOs"
    return (f"the highest rate tried, {high:g} req/s, still meets the SLOs: capacity ≥ {high:g} req/s (raise --high "
            "to find it)")


async def _bounds(run: _Trials, low: float, high: float) -> tuple[float, float] | Beyond:
    """[low, high] when low meets the SLOs and high does not; else why there is nothing to bisect."""
    if not await run.meets(low, run.base.seed):
        return "low"
    if await run.meets(high, run.base.seed):
        return "high"
    return low, high


async def _bracket(run: _Trials, start: float, low: float, high: float) -> tuple[float, float] | Beyond:
    """A passing rate and a failing one around `start`, stepping by GROW up from it while it passes, down
    while it fails, within [low, high]; else why there is nothing to bisect."""
    seed, rate = run.base.seed, min(max(start, low), high)
    if await run.meets(rate, seed):
        while rate < high:
            up = min(rate * GROW, high)
            if not await run.meets(up, seed):
                return rate, up
            rate = up
        return "high"
    while rate > low:
        down = max(rate / GROW, low)
        if await run.meets(down, seed):
            return down, rate
        rate = down
    return "low"


async def _bisect(run: _Trials, lo: float, hi: float, seed: int, steps: int) -> tuple[float, float]:
    """`steps` halvings of [lo, hi]: lo still meets the SLOs, hi does not."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        if await run.meets(mid, seed):
            lo = mid
        else:
            hi = mid
    return lo, hi
