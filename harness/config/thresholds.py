"""Thresholds: pass/fail limits on a phase's figures, k6's idea in this harness's metric names.

    thresholds: {ttft_p99: "<500ms", itl_p50: "<30ms", error_rate: "<1%", output_tokens_per_s: ">2000",
                 goodput_fraction: ">0.95"}

A latency takes a time unit (us, ms, s, m); a fraction a share (0.01) or a percentage (1%); a rate a plain
number per second. A misspelt metric, operator or unit fails the scenario's validation, before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator

from harness.config.metric_registry import Kind, metric

Op = Literal["<", "<=", ">", ">="]
_MS_PER = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_FORM = re.compile(r"^\s*(<=|>=|<|>)\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z%]*)\s*$")


@dataclass(frozen=True, slots=True)
class Threshold:
    metric: str
    op: Op
    limit: float  # ms for a latency, a share for a fraction, per second for a rate
    text: str  # as written: "<500ms"

    @property
    def kind(self) -> Kind:
        return metric(self.metric).kind

    def holds(self, observed: float) -> bool:
        return {"<": observed < self.limit, "<=": observed <= self.limit, ">": observed > self.limit,
                ">=": observed >= self.limit}[self.op]


def parse_threshold(name: str, text: str) -> Threshold:
    """One threshold, or a ValueError naming what is wrong with it."""
    kind = metric(name).kind
    match = _FORM.match(str(text))
    if match is None:
        raise ValueError(f"{name}: {text!r}: write an operator and a value, e.g. '<500ms', '>0.95'")
    op, number, unit = match.group(1), float(match.group(2)), match.group(3)
    if kind == "latency":
        if unit not in _MS_PER:
            raise ValueError(f"{name}: {text!r}: a latency needs a unit: us, ms, s or m")
        limit = number * _MS_PER[unit]
    elif kind == "fraction":
        if unit not in ("", "%"):
            raise ValueError(f"{name}: {text!r}: a fraction is a share (0.01) or a percentage (1%)")
        limit = number / 100 if unit == "%" else number
        if limit > 1:
            raise ValueError(f"{name}: {text!r}: a fraction is at most 1 (100%)")
    else:
        if unit:
            raise ValueError(f"{name}: {text!r}: a rate is a plain number per second")
        limit = number
    return Threshold(name, op, limit, f"{op}{match.group(2)}{unit}")  # type: ignore[arg-type]


def parse_thresholds(raw: dict[str, str]) -> list[Threshold]:
    return [parse_threshold(name, text) for name, text in raw.items()]


def _valid(raw: dict[str, str]) -> dict[str, str]:
    """As written, once every entry parses: a scenario saved with its thresholds reads the same."""
    return {t.metric: t.text for t in parse_thresholds(raw)}


Thresholds = Annotated[dict[str, str], AfterValidator(_valid)]
