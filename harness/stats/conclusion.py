"""The plain-language conclusion of an interactive-versus-batch run, computed from its summary.

Each fixed-batch phase is compared with the first open-loop (interactive) phase on throughput and
time to first token; the sentences only restate ratios of numbers that are in the table.
"""

from __future__ import annotations

from typing import Any

_OPEN_LOOP = {"poisson", "gamma", "constant", "ramp", "trace"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _kind(phase: dict[str, Any]) -> str:
    return str(phase["config"]["load"]["type"])


def comparisons(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """For each batch phase: its throughput and TTFT ratios to the interactive phase."""
    phases = summary["phases"]
    interactive = next((p for p in phases if _kind(p) in _OPEN_LOOP and p["requests"]["ok"]), None)
    if interactive is None:
        return []
    out = []
    for p in phases:
        if _kind(p) != "batch" or not p["requests"]["ok"]:
            continue
        out.append({
            "phase": p["name"], "batch_size": p["config"]["load"]["size"], "versus": interactive["name"],
            "throughput_ratio": _ratio(p["throughput"]["output_tokens_per_s"],
                                       interactive["throughput"]["output_tokens_per_s"]),
            "ttft_p50_ratio": _ratio(p["latency_ms"]["ttft"]["p50"], interactive["latency_ms"]["ttft"]["p50"]),
            "ttft_p99_ratio": _ratio(p["latency_ms"]["ttft"]["p99"], interactive["latency_ms"]["ttft"]["p99"]),
            "itl_p50_ratio": _ratio(p["latency_ms"]["itl"]["p50"], interactive["latency_ms"]["itl"]["p50"]),
            "goodput_fraction": p["goodput"]["fraction"],
            "interactive_goodput_fraction": interactive["goodput"]["fraction"],
        })
    return out


def sentences(comps: list[dict[str, Any]]) -> list[str]:
    lines = []
    for c in comps:
        if c["throughput_ratio"] is None or c["ttft_p99_ratio"] is None:
            continue
        line = (f"Batches of {c['batch_size']} deliver {c['throughput_ratio']:.1f}× the output tokens/s of the "
                f"interactive run, at {c['ttft_p99_ratio']:.1f}× its p99 TTFT")
        if c["itl_p50_ratio"] is not None:
            line += f" and {c['itl_p50_ratio']:.1f}× its median inter-token latency"
        line += (f"; {c['goodput_fraction']:.0%} of batched requests meet the SLOs, against "
                 f"{c['interactive_goodput_fraction']:.0%} interactive.")
        lines.append(line)
    return lines
