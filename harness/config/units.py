"""Durations with units, in scenario files and flags alike: `30s`, `5m`, `500ms`, `1.5h`, or a bare number in
the field's own unit (seconds for `*_s` fields and flags, milliseconds for `*_ms`)."""

from __future__ import annotations

import math
import re

_SECONDS_PER = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s|min|m|h)?\s*$")


def duration_seconds(value: object, bare_unit: str = "s") -> float:
    """Seconds from a number (in `bare_unit`) or a text such as `30s`; ValueError naming what was given."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        return float(value) * _SECONDS_PER[bare_unit]
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not a duration (use 30s, 5m, 500ms, or a number of {_NAMES[bare_unit]})")
    seconds = float(match.group(1)) * _SECONDS_PER[match.group(2) or bare_unit]
    if not math.isfinite(seconds):  # `1e999s` reads as infinity
        raise ValueError(f"{value!r} is not a finite duration")
    return seconds


_NAMES = {"s": "seconds", "ms": "milliseconds"}


def as_seconds(value: object) -> object:
    """Pydantic before-validator for `*_s` fields: numbers and texts converted; anything else passes through
    for the type check to refuse (or another member of a union to take)."""
    return duration_seconds(value, "s") if isinstance(value, str | int | float) else value


def as_millis(value: object) -> object:
    """Pydantic before-validator for `*_ms` fields."""
    return duration_seconds(value, "ms") * 1e3 if isinstance(value, str | int | float) else value


def as_fraction(text: str) -> float:
    """A share from `10%` or `0.1`; ValueError naming what was given."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a share (use 10% or 0.1)") from None
    if not 0 <= value <= 10:
        raise ValueError(f"{text!r}: a tolerance between 0% and 1000%")
    return value


# A field's unit from its name, for messages: the suffix says it for durations and sizes; a few loads by name
_UNIT_SUFFIXES = (("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("_bytes", "bytes"), ("tokens", "tokens"), ("_mib", "MiB"))
_UNIT_NAMES = {"rate": "req/s", "requests": "requests", "concurrency": "requests at once", "size": "requests",
               "batches": "batches", "max_in_flight": "requests at once"}


def unit_of(field: str) -> str:
    """The unit of a scenario field or flag named `field`, or "" (a share, a count of nothing in
    particular)."""
    return _UNIT_NAMES.get(field) or next((unit for end, unit in _UNIT_SUFFIXES if field.endswith(end)), "")


def number_text(value: float, unit: str = "") -> str:
    """`value` as a message shows it: 1,000,000 for a whole number, 0.25 or 1e-300 otherwise, with its
    unit."""
    shown = f"{value:,}" if isinstance(value, int) or (abs(value) < 1e15 and value == int(value)) else f"{value:g}"
    return f"{shown.removesuffix('.0')} {unit}".rstrip()
