"""A run's thresholds as lines under its table: '✗ batch ttft_p99 <500ms: 830.2 ms', each with what was
observed in its own unit."""

from __future__ import annotations

from harness.stats.schema import Summary, ThresholdResult


def observed_text(result: ThresholdResult) -> str:
    value, unit = result.observed, result.unit
    if value is None:
        return "no data"
    return f"{value:,.1f} ms" if unit == "ms" else f"{value:.2%}" if unit == "" else f"{value:,.2f}/s"


def threshold_lines(summary: Summary, failed_only: bool = False) -> list[str]:
    """'✗ batch ttft_p99 <500ms: 830.2 ms', one per threshold and phase (aligned, unless only the failed)."""
    rows = [(p.name, r) for p in summary.phases for r in p.thresholds if not (failed_only and r.passed)]
    width = 0 if failed_only else max((len(name) for name, _ in rows), default=0)
    return [f"{'✓' if r.passed else '✗'} {name:<{width}}{'  ' if width else ' '}{r.metric} {r.limit}: "
            f"{observed_text(r)}{' (untrusted: the client could have moved it)' if r.untrusted else ''}"
            for name, r in rows]
