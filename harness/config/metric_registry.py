"""Every figure of a phase that a user can name — in a threshold, `harness compare --tolerance`, a `--repeat`
table, `harness history --metric`, a Pushgateway push, the live exporter — once: its name, kind and unit,
which way is better, what it means, and where it sits in a phase's summary (latency distributions by name
and statistic; the rest by field). The readers (harness.stats.thresholds for a phase's summary,
harness.stats.compare for blocks of records) go by these entries, never by splitting names.

It lives with the configuration because a scenario's thresholds are checked against it when the scenario
is read, before any statistics exist.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

Kind = Literal["latency", "fraction", "rate"]

LATENCIES: dict[str, str] = {
    "ttft": "time to first token: first token-bearing chunk − sent",
    "ttft_from_intended": "time to first token from the intended send (what a waiting user sees)",
    "time_to_first_content": "first answer text − sent (after any reasoning)",
    "itl": "inter-token latency: gaps between token-bearing chunks, token-normalised",
    "chunk_gap": "gaps between token-bearing chunks, per chunk",
    "tpot": "time per output token: (last − first token) / (output tokens − 1), per request",
    "e2e": "end-to-end latency: last token − sent",
    "e2e_from_intended": "end-to-end latency from the intended send",
    "schedule_lag": "sent − intended send time (the client's own lateness)",
}
# The statistic as a metric name spells it → the field of a Distribution (summary.json's "p99.9").
STATISTICS: dict[str, str] = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99_9",
                              "mean": "mean", "max": "max"}
UNITS: dict[Kind, str] = {"latency": "ms", "fraction": "", "rate": "/s"}


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Kind
    doc: str
    higher_is_better: bool = False
    latency: str | None = None  # a latency distribution of the phase (latency_ms.<latency>) …
    statistic: str | None = None  # … and which of its fields
    quantile: float | None = None  # … as a percentile (99.9 for p999), None for the mean
    field: tuple[str, ...] = ()  # otherwise: the attribute path in a phase's summary
    per: tuple[str, ...] = ()  # a ratio: `field` over this path (None when it is 0)

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def absolute(self) -> bool:
        """A share changes by points (an error rate from 0.1% to 0.3% is +0.2 pt), not by a ratio."""
        return self.kind == "fraction"


QUANTILES: dict[str, float | None] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9,
                                      "mean": None, "max": 100.0}


def _latency(name: str, stat: str) -> Metric:
    return Metric(f"{name}_{stat}", "latency", f"{LATENCIES[name]}, {stat}", latency=name,
                  statistic=STATISTICS[stat], quantile=QUANTILES[stat])


_OTHERS = (
    Metric("error_rate", "fraction", "failed requests / requests of the window",
           field=("requests", "failed"), per=("requests", "total")),
    Metric("goodput_fraction", "fraction", "share of the window's requests within every SLO", True,
           field=("goodput", "fraction")),
    Metric("output_tokens_per_s", "rate", "output tokens per second of the window", True,
           field=("throughput", "output_tokens_per_s")),
    Metric("total_tokens_per_s", "rate", "prompt and output tokens per second of the window", True,
           field=("throughput", "total_tokens_per_s")),
    Metric("requests_per_s", "rate", "ok requests per second of the window", True,
           field=("throughput", "requests_per_s")),
    Metric("goodput_requests_per_s", "rate", "ok requests within every SLO, per second", True,
           field=("goodput", "requests_per_s")),
)
REGISTRY: dict[str, Metric] = {
    **{m.name: m for m in (_latency(n, s) for n in LATENCIES for s in STATISTICS)},
    **{m.name: m for m in _OTHERS},
}

# The figures a comparison of two runs judges (computable from blocks of records), and the ones a --repeat
# table and `harness history` follow.
COMPARED = (*(f"{n}_{s}" for n in ("ttft", "itl", "tpot", "e2e") for s in ("p50", "p90", "p99", "mean")),
            "output_tokens_per_s", "requests_per_s", "error_rate")
FOLLOWED = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "tpot_p50", "e2e_p50", "e2e_p99", "output_tokens_per_s",
            "requests_per_s", "error_rate", "goodput_fraction")

# The scenario's per-request SLOs (scenario.slo fields) and the latency each limits, as the table and the
# report's cards judge a phase by: its p99 of that latency within the limit.
SLO_LATENCIES = (("ttft_ms", "ttft", "TTFT"), ("tpot_ms", "tpot", "TPOT"), ("e2e_ms", "e2e", "E2E"))


def metric(name: str) -> Metric:
    """The entry, or a ValueError naming the nearest names."""
    found = REGISTRY.get(name)
    if found is None:
        near = difflib.get_close_matches(name, list(REGISTRY), n=3)
        others = ", ".join(m.name for m in _OTHERS)
        hint = f"; did you mean {', '.join(near)}?" if near else (
            f"; one of <latency>_<stat> ({'/'.join(list(LATENCIES)[:3])}…_{'/'.join(STATISTICS)}), {others}")
        raise ValueError(f"{name!r}: unknown metric{hint}")
    return found
