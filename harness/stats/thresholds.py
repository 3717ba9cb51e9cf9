"""A phase's figures against its thresholds: each one's observed value and whether it held."""

from __future__ import annotations

from collections.abc import Mapping

from harness.config.thresholds import Threshold, parse_thresholds
from harness.stats.schema import PhaseStats, ThresholdResult

UNITS = {"latency": "ms", "fraction": "", "rate": "/s"}


def observed(metric: str, phase: PhaseStats) -> float | None:
    """The figure a threshold names, in its canonical unit (ms, a share, per second); None: no data."""
    if metric == "error_rate":
        return phase.requests.failed / phase.requests.total if phase.requests.total else None
    if metric == "goodput_fraction":
        return phase.goodput.fraction
    if metric == "goodput_requests_per_s":
        return phase.goodput.requests_per_s
    if metric in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"):
        return float(getattr(phase.throughput, metric))
    name, stat = metric.rsplit("_", 1)
    value = getattr(getattr(phase.latency_ms, name), "p99_9" if stat == "p999" else stat)
    return None if value is None else float(value)


def check(threshold: Threshold, phase: PhaseStats) -> ThresholdResult:
    value = observed(threshold.metric, phase)
    return ThresholdResult(metric=threshold.metric, limit=threshold.text, observed=value,
                           unit=UNITS[threshold.kind], passed=value is not None and threshold.holds(value))


def evaluate(scenario_thresholds: Mapping[str, str], phase_thresholds: Mapping[str, str],
             phase: PhaseStats) -> list[ThresholdResult]:
    """The scenario's thresholds and the phase's own (which win for the same metric), in that order."""
    merged = {**scenario_thresholds, **phase_thresholds}
    return [check(t, phase) for t in parse_thresholds(dict(merged))]
