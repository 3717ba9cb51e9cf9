"""A scenario run N times: each metric's mean across the runs with its 95% interval (Student's t over runs,
each run one independent observation: fresh seeds, and a fresh simulator where the bundled one is used)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from harness.config.metric_registry import FOLLOWED
from harness.config.scenario import Scenario
from harness.stats.compare import t975
from harness.stats.schema import Summary
from harness.stats.thresholds import observed


def derived_seed(seed: int, k: int) -> int:
    """The k-th repeat's seed: the scenario's own for the first, fresh and reproducible for the others."""
    return seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0] & 0x7FFFFFFF)


def repeat_scenario(scenario: Scenario, k: int) -> Scenario:
    """The k-th repeat: fresh seeds for arrivals, prompts and the simulator, derived from the scenario's."""
    if k == 0:
        return scenario
    sim = scenario.simulator.changed(seed=derived_seed(scenario.simulator.seed, k))
    return scenario.changed(seed=derived_seed(scenario.seed, k), simulator=sim)


@dataclass(frozen=True, slots=True)
class MeanInterval:
    """A metric over N runs: its mean and 95% interval (NaN bounds with one run), and each run's value."""

    mean: float
    low: float
    high: float
    runs: int
    values: list[float]

    def to_json(self) -> dict[str, float | int | list[float]]:
        return asdict(self)


def mean_interval(values: Sequence[float]) -> MeanInterval:
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    half = t975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v)) if len(v) > 1 else math.nan
    return MeanInterval(mean, mean - half, mean + half, len(v), v.tolist())


def across_runs(summaries: Sequence[Summary]) -> dict[str, dict[str, MeanInterval]]:
    """phase → metric → mean, 95% interval and the runs' values, over the phases every run has."""
    out: dict[str, dict[str, MeanInterval]] = {}
    for first in summaries[0].phases:
        phases = [next((p for p in s.phases if p.name == first.name), None) for s in summaries]
        stats = [p for p in phases if p is not None]
        if len(stats) < len(phases):
            continue
        out[first.name] = {}
        for metric in FOLLOWED:
            values = [observed(metric, s) for s in stats]
            known = [float(v) for v in values if v is not None]
            if len(known) == len(values):
                out[first.name][metric] = mean_interval(known)
    return out
