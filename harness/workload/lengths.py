"""Token counts per request: fixed, uniform, normal, lognormal, or sampled from a trace. Pure and seeded."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from harness.config.workload import Length, LengthDist
from harness.workload.traces import read_trace


@functools.lru_cache(maxsize=16)
def _empirical(file: str, column: str) -> np.ndarray:
    rows = read_trace(Path(file)).rows
    return np.array([r.input_tokens if column == "input" else r.output_tokens for r in rows], dtype=np.int64)


def fixed(length: Length) -> bool:
    """`length` draws nothing: `draw` needs no generator for it."""
    return isinstance(length, int) or length.dist == "fixed"


def draw(length: Length, rng: np.random.Generator | None) -> int:
    """One token count from `length` (a plain integer is a fixed length); `rng` may be None for a `fixed`
    one."""
    if isinstance(length, int):
        return length
    d: LengthDist = length
    if d.dist == "fixed":
        value = float(d.value or 1)
    elif rng is None:
        raise ValueError(f"a {d.dist} length needs a generator")
    elif d.dist == "uniform":
        value = float(rng.integers(d.min, (d.max or d.min) + 1))
    elif d.dist == "normal":
        value = rng.normal(d.mean or 0.0, d.std or 0.0)  # validated present
    elif d.dist == "lognormal":
        value = rng.lognormal(np.log(d.median or 1.0), d.sigma or 0.0)
    else:
        values = _empirical(d.file or "", d.column)
        value = float(values[rng.integers(0, len(values))])
    upper = d.max if d.max is not None else np.inf
    return int(np.clip(round(value), d.min, upper))
