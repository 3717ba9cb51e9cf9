"""A scenario run N times: each metric's mean across the runs with its 95% interval (Student's t over runs,
each run one independent observation: fresh seeds, and a fresh simulator where the bundled one is used)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.stats.compare import t975
from harness.stats.schema import PhaseSummary
from harness.stats.thresholds import observed

METRICS = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "tpot_p50", "e2e_p50", "e2e_p99", "output_tokens_per_s",
           "requests_per_s", "error_rate", "goodput_fraction")


def derived_seed(seed: int, k: int) -> int:
    """The k-th repeat's seed: the scenario's own for the first, fresh and reproducible for the others."""
    return seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0] & 0x7FFFFFFF)


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    v = np.asarray(values, dtype=np.float64)
    mean = float(v.mean())
    half = t975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v)) if len(v) > 1 else math.nan
    return {"mean": mean, "low": mean - half, "high": mean + half, "runs": len(v), "values": v.tolist()}


def across_runs(summaries: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """phase → metric → mean, 95% interval and the runs' values, over the phases every run has."""
    names = [p["name"] for p in summaries[0]["phases"]]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        phases = [next((p for p in s["phases"] if p["name"] == name), None) for s in summaries]
        if any(p is None for p in phases):
            continue
        stats = [PhaseSummary.model_validate(p) for p in phases]
        out[name] = {}
        for metric in METRICS:
            values = [observed(metric, s) for s in stats]
            if all(v is not None for v in values):
                out[name][metric] = mean_interval([float(v) for v in values if v is not None])
    return out
