"""Every figure of a phase that a user can name — in a threshold, `harness compare --tolerance`, a `--repeat`
table, `harness history --metric`, a Pushgateway push, the live exporter, twin validation — defined once: its
per-record sample (a `Latency`) or the counts it is a ratio of, its statistic (a percentile as a number, the
mean, a rate, a share), unit, which way is better, its default tolerance, its label and export name, and the
readers that show it (`Role`). The readers iterate these entries; none spells a metric's name or splits one.

It lives with the configuration because a scenario's thresholds are checked against it when the scenario
is read, before any statistics exist.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Kind = Literal["latency", "fraction", "rate"]
# Who shows a figure: `harness compare` judges it (from blocks of records), a --repeat table and `harness
# history` follow it, `history show` prints it by default, twin validation judges a twin on it, the table
# has a row for it.
Role = Literal["compared", "followed", "shown", "validated", "row"]
# The counts of a block of records (harness.stats.compare.Block) a ratio metric is drawn from.
BlockCount = Literal["failed", "total", "tokens", "done", "seconds"]


class Latency(StrEnum):
    """A per-record latency: summary.json's `latency_ms.<value>`, the sample a latency metric takes."""

    TTFT = "ttft"
    TTFT_ANSWER = "ttft_answer"
    TTFT_FROM_INTENDED = "ttft_from_intended"
    ITL = "itl"
    CHUNK_GAP = "chunk_gap"
    TPOT = "tpot"
    E2E = "e2e"
    E2E_FROM_INTENDED = "e2e_from_intended"
    SCHEDULE_LAG = "schedule_lag"


@dataclass(frozen=True, slots=True)
class LatencyInfo:
    doc: str
    label: str  # as the table's row and the figures' names spell it
    row: bool = False  # a p50 / p90 / p99 row of the table
    live: bool = False  # a histogram of the live exporter
    pushed: bool = False  # its p50 / p90 / p99 pushed to a Pushgateway, by quantile


LATENCIES: dict[Latency, LatencyInfo] = {
    Latency.TTFT: LatencyInfo("time to first token: first token-bearing chunk − sent", "TTFT", True, True, True),
    # What a chat user waits for: a reasoning model's thinking streams first, and TTFT times its first token.
    Latency.TTFT_ANSWER: LatencyInfo("time to the first answer token: first answer text − sent (after any "
                                     "reasoning; TTFT when the model does not think)", "TTFT (answer)", True, True,
                                     True),
    Latency.TTFT_FROM_INTENDED: LatencyInfo(
        "time to first token from the intended send (what a waiting user sees)", "TTFT from intended", True),
    Latency.ITL: LatencyInfo("inter-token latency: gaps between token-bearing chunks, token-normalised", "ITL",
                             True, True, True),
    Latency.CHUNK_GAP: LatencyInfo("gaps between token-bearing chunks, per chunk", "chunk gap"),
    Latency.TPOT: LatencyInfo("time per output token: (last − first token) / (output tokens − 1), per request",
                              "TPOT", True, True, True),
    Latency.E2E: LatencyInfo("end-to-end latency: last token − sent", "E2E", True, True, True),
    Latency.E2E_FROM_INTENDED: LatencyInfo("end-to-end latency from the intended send", "E2E from intended"),
    Latency.SCHEDULE_LAG: LatencyInfo("sent − intended send time (the client's own lateness)", "schedule lag",
                                      live=True),
}
# The statistic as a metric name spells it → the field of a Distribution (summary.json's "p99.9") and its
# percentile (None: the mean).
STATISTICS: dict[str, tuple[str, float | None]] = {
    "p50": ("p50", 50.0), "p90": ("p90", 90.0), "p95": ("p95", 95.0), "p99": ("p99", 99.0), "p999": ("p99_9", 99.9),
    "mean": ("mean", None), "max": ("max", 100.0)}
PUSHED_STATISTICS = ("p50", "p90", "p99")
UNITS: dict[Kind, str] = {"latency": "ms", "fraction": "", "rate": "/s"}


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    kind: Kind
    doc: str
    higher_is_better: bool = False
    label: str = ""  # as a table or a validation spells it
    latency: Latency | None = None  # a latency distribution of the phase (latency_ms.<latency>) …
    statistic: str | None = None  # … and which of its fields
    quantile: float | None = None  # … as a percentile (99.9 for p999), None for the mean
    field: tuple[str, ...] = ()  # otherwise: the attribute path in a phase's summary
    per: tuple[str, ...] = ()  # a ratio: `field` over this path (None when it is 0)
    ratio: tuple[BlockCount, BlockCount] | None = None  # from blocks of records: this count over that one
    tolerance: float | None = None  # `harness compare`'s default (relative; a share's absolute)
    export: str | None = None  # a Pushgateway gauge of its own (harness_summary_<export>)
    roles: frozenset[Role] = frozenset()
    fmt: str = ",.0f"  # how the table prints a rate

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def absolute(self) -> bool:
        """A share changes by points (an error rate from 0.1% to 0.3% is +0.2 pt), not by a ratio."""
        return self.kind == "fraction"

    @property
    def central(self) -> bool:
        """Not a tail: a median, a mean, a rate or a share — what a baseline may rest on. A tail is what the
        client's rare stalls move first; it stays untrusted, figure by figure, in every comparison against
        that run, rather than keeping the run from being a baseline."""
        return self.quantile is None or self.quantile <= 50.0


def _latency(latency: Latency, stat: str, tolerance: float | None = None, roles: tuple[Role, ...] = ()) -> Metric:
    info = LATENCIES[latency]
    field, quantile = STATISTICS[stat]
    return Metric(f"{latency}_{stat}", "latency", f"{info.doc}, {stat}", label=f"{info.label} {stat} ms",
                  latency=latency, statistic=field, quantile=quantile, tolerance=tolerance, roles=frozenset(roles),
                  export=f"{latency}_p99_seconds" if latency is Latency.SCHEDULE_LAG and stat == "p99" else None)


# The latency figures with a role or a tolerance; every other <latency>_<statistic> is nameable in thresholds.
# Tails are noisier than medians: wider tolerances. (Their order seeds the comparison's resampling: keep it.)
_JUDGED: dict[tuple[Latency, str], tuple[float | None, tuple[Role, ...]]] = {
    (Latency.TTFT, "p50"): (0.10, ("compared", "followed", "validated")),
    (Latency.TTFT, "p90"): (None, ("compared",)),
    (Latency.TTFT, "p99"): (0.20, ("compared", "followed", "shown", "validated")),
    (Latency.TTFT, "mean"): (None, ("compared",)),
    (Latency.TTFT_ANSWER, "p50"): (0.10, ("compared",)),
    (Latency.TTFT_ANSWER, "p99"): (0.20, ("compared",)),
    (Latency.ITL, "p50"): (0.05, ("compared", "followed", "shown", "validated")),
    (Latency.ITL, "p90"): (None, ("compared",)),
    (Latency.ITL, "p99"): (0.15, ("compared", "followed")),
    (Latency.ITL, "mean"): (None, ("compared",)),
    (Latency.TPOT, "p50"): (0.05, ("compared", "followed")),
    (Latency.TPOT, "p90"): (None, ("compared",)),
    (Latency.TPOT, "p99"): (None, ("compared",)),
    (Latency.TPOT, "mean"): (None, ("compared",)),
    (Latency.E2E, "p50"): (0.10, ("compared", "followed")),
    (Latency.E2E, "p90"): (None, ("compared",)),
    (Latency.E2E, "p99"): (0.15, ("compared", "followed")),
    (Latency.E2E, "mean"): (None, ("compared",)),
}
TEXTS_PER_S = "inputs_per_s"  # shown only where a request carried several texts, or nothing was generated
_OTHERS = (
    Metric("output_tokens_per_s", "rate", "output tokens per second of the window", True, "output tokens/s",
           field=("throughput", "output_tokens_per_s"), ratio=("tokens", "seconds"), tolerance=0.05,
           export="output_tokens_per_second", roles=frozenset({"compared", "followed", "shown", "validated", "row"})),
    Metric("total_tokens_per_s", "rate", "prompt and output tokens per second of the window", True, "total tokens/s",
           field=("throughput", "total_tokens_per_s"), roles=frozenset({"row"})),
    Metric("requests_per_s", "rate", "ok requests per second of the window", True, "requests/s",
           field=("throughput", "requests_per_s"), ratio=("done", "seconds"), export="requests_per_second",
           roles=frozenset({"compared", "followed", "row"}), fmt=".2f"),
    Metric(TEXTS_PER_S, "rate", "texts the ok requests carried, per second of the window (embeddings)", True,
           "texts/s", field=("throughput", "inputs_per_s"), roles=frozenset({"row"}), fmt=",.1f"),
    Metric("error_rate", "fraction", "failed requests / requests of the window", label="error rate",
           field=("requests", "failed"), per=("requests", "total"), ratio=("failed", "total"), tolerance=0.01,
           roles=frozenset({"compared", "followed", "shown"})),
    Metric("goodput_fraction", "fraction", "share of the window's requests within every SLO", True, "goodput share",
           field=("goodput", "fraction"), export="goodput_fraction", roles=frozenset({"followed"})),
    Metric("goodput_requests_per_s", "rate", "ok requests within every SLO, per second", True, "goodput req/s",
           field=("goodput", "requests_per_s")),
)
REGISTRY: dict[str, Metric] = {
    **{m.name: m for m in (_latency(n, s, *_JUDGED.get((n, s), (None, ()))) for n in LATENCIES for s in STATISTICS)},
    **{m.name: m for m in _OTHERS},
}


def having(role: Role) -> tuple[Metric, ...]:
    """The entries a reader shows, in the registry's order."""
    return tuple(m for m in REGISTRY.values() if role in m.roles)


def of(latency: Latency, stat: str) -> Metric:
    """A latency's statistic (`stat` as a name spells it: p50, p999, mean)."""
    return REGISTRY[f"{latency}_{stat}"]


COMPARED = tuple(m.name for m in having("compared"))
FOLLOWED = tuple(m.name for m in having("followed"))
# The statistics `harness compare` judges of some latency (as a name spells them), in STATISTICS' order.
COMPARED_STATISTICS = tuple(stat for stat, (field, _) in STATISTICS.items() if any(
    m.latency is not None and m.statistic == field for m in having("compared")))
DEFAULT_TOLERANCES: dict[str, float] = {m.name: m.tolerance for m in REGISTRY.values() if m.tolerance is not None}
RATES = tuple(m.name for m in REGISTRY.values() if m.kind == "rate")
GOODPUT = tuple(m.name for m in REGISTRY.values() if m.field[:1] == ("goodput",))

# The scenario's per-request SLOs (scenario.slo fields) and the latency each limits, as the table and the
# report's cards judge a phase by: its p99 of that latency within the limit.
SLO_LATENCIES = (("ttft_ms", Latency.TTFT), ("ttft_answer_ms", Latency.TTFT_ANSWER), ("tpot_ms", Latency.TPOT),
                 ("e2e_ms", Latency.E2E))
# The latencies charted against throughput with their SLO line; the answer's TTFT only when it is an
# objective.
CHARTED = (Latency.TTFT, Latency.TTFT_ANSWER, Latency.TPOT)
# Names a metric had before; a scenario or a command line written then still reads.
_RENAMED = {"time_to_first_content_": "ttft_answer_"}


def metric(name: str) -> Metric:
    """The entry, or a ValueError naming the nearest names."""
    for before, now in _RENAMED.items():
        if name.startswith(before):
            name = now + name.removeprefix(before)
    found = REGISTRY.get(name)
    if found is None:
        near = difflib.get_close_matches(name, list(REGISTRY), n=3)
        others = ", ".join(m.name for m in _OTHERS)
        hint = f"; did you mean {', '.join(near)}?" if near else (
            f"; one of <latency>_<stat> ({'/'.join(list(LATENCIES)[:3])}…_{'/'.join(STATISTICS)}), {others}")
        raise ValueError(f"{name!r}: unknown metric{hint}")
    return found
