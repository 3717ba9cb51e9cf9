"""The plain-language conclusion of an interactive-versus-batch run, computed from its phases.

Each fixed-batch phase is compared with the first open-loop (interactive) phase on throughput and
time to first token; the sentences only restate ratios of numbers that are in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.stats.schema import Comparison, PhaseComparison, PhaseSummary

_OPEN_LOOP = {"poisson", "gamma", "constant", "ramp", "trace"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _kind(phase: PhaseSummary) -> str:
    return str(phase.config["load"]["type"])


def comparisons(phases: Sequence[PhaseSummary]) -> list[PhaseComparison]:
    """For each batch phase: its throughput and TTFT ratios to the interactive phase."""
    interactive = next((p for p in phases if _kind(p) in _OPEN_LOOP and p.requests.ok), None)
    if interactive is None:
        return []
    i_lat = interactive.latency_ms
    return [
        PhaseComparison(
            phase=p.name, batch_size=p.config["load"]["size"], versus=interactive.name,
            throughput_ratio=_ratio(p.throughput.output_tokens_per_s, interactive.throughput.output_tokens_per_s),
            ttft_p50_ratio=_ratio(p.latency_ms.ttft.p50, i_lat.ttft.p50),
            ttft_p99_ratio=_ratio(p.latency_ms.ttft.p99, i_lat.ttft.p99),
            itl_p50_ratio=_ratio(p.latency_ms.itl.p50, i_lat.itl.p50),
            goodput_fraction=p.goodput.fraction, interactive_goodput_fraction=interactive.goodput.fraction,
        )
        for p in phases if _kind(p) == "batch" and p.requests.ok
    ]


def sentences(comps: Sequence[PhaseComparison]) -> list[str]:
    lines = []
    for c in comps:
        if c.throughput_ratio is None or c.ttft_p99_ratio is None:
            continue
        line = (f"Batches of {c.batch_size} deliver {c.throughput_ratio:.1f}× the output tokens/s of the "
                f"interactive run, at {c.ttft_p99_ratio:.1f}× its p99 TTFT")
        if c.itl_p50_ratio is not None:
            line += f" and {c.itl_p50_ratio:.1f}× its median inter-token latency"
        line += (f"; {c.goodput_fraction:.0%} of batched requests meet the SLOs, against "
                 f"{c.interactive_goodput_fraction:.0%} interactive.")
        lines.append(line)
    return lines


def compare(phases: Sequence[PhaseSummary]) -> Comparison:
    comps = comparisons(phases)
    return Comparison(phases=comps, conclusion=sentences(comps))
