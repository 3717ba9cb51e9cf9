"""A phase's figures against its thresholds: each one's observed value and whether it held."""

from __future__ import annotations

from collections.abc import Mapping

from harness.config.metric_registry import Metric, metric
from harness.config.thresholds import Threshold, parse_thresholds
from harness.stats.schema import PhaseStats, ThresholdResult


def _at(phase: object, path: tuple[str, ...]) -> float | None:
    for name in path:
        phase = getattr(phase, name)
    return None if phase is None else float(phase)  # type: ignore[arg-type]


def read(entry: Metric, phase: PhaseStats) -> float | None:
    """The registry's figure in a phase's summary, in its unit (ms, a share, per second); None: no data."""
    if entry.latency is not None and entry.statistic is not None:
        return _at(phase.latency_ms, (entry.latency, entry.statistic))
    value = _at(phase, entry.field)
    if entry.per:
        whole = _at(phase, entry.per)
        return value / whole if whole and value is not None else None
    return value


def observed(name: str, phase: PhaseStats) -> float | None:
    """The figure a threshold (or a comparison, a repeat, the history) names."""
    return read(metric(name), phase)


def check(threshold: Threshold, phase: PhaseStats) -> ThresholdResult:
    value = observed(threshold.metric, phase)
    return ThresholdResult(metric=threshold.metric, limit=threshold.text, observed=value,
                           unit=metric(threshold.metric).unit, passed=value is not None and threshold.holds(value),
                           untrusted=phase.untrusted(threshold.metric))


def evaluate(scenario_thresholds: Mapping[str, str], phase_thresholds: Mapping[str, str],
             phase: PhaseStats) -> list[ThresholdResult]:
    """The scenario's thresholds and the phase's own (which win for the same metric), in that order."""
    merged = {**scenario_thresholds, **phase_thresholds}
    return [check(t, phase) for t in parse_thresholds(dict(merged))]
