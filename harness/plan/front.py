"""A plan's answer: each deployment's figures (cost, power, capacity at the SLOs, $ per million tokens, tokens
per joule), the Pareto fronts (cost against capacity; cost against TTFT p99 at the target load), the
cheapest deployment that carries the target, and in words what binds it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.devices.links import LINKS
from harness.plan.search import Sized
from harness.plan.trial import Trial


@dataclass(frozen=True, slots=True)
class PlanRow:
    measured: Sized
    cost: float  # $/h with prices, else devices
    watts: float | None
    output_tokens_per_s: float | None  # at capacity, within the SLOs
    usd_per_m_tokens: float | None
    tokens_per_joule: float | None


def rows(measured: Sequence[Sized], prices: Mapping[str, float], mean_output: float) -> list[PlanRow]:
    out = []
    for m in measured:
        cost = m.deployment.cost_per_h(prices)
        watts = m.deployment.watts()
        tokens = m.capacity * mean_output if m.capacity is not None else None
        usd = cost / 3600 / tokens * 1e6 if cost is not None and tokens else None
        out.append(PlanRow(m, cost if cost is not None else float(m.deployment.devices), watts, tokens, usd,
                       tokens / watts if tokens and watts else None))
    return out


def capacity_front(table: Sequence[PlanRow]) -> list[PlanRow]:
    """The deployments no cheaper one matches in capacity, cheapest first."""
    front, best = [], 0.0
    for row in sorted((r for r in table if r.measured.capacity), key=lambda r: (r.cost, -(r.measured.capacity or 0))):
        if (row.measured.capacity or 0) > best:
            front.append(row)
            best = row.measured.capacity or 0
    return front


def ttft_front(table: Sequence[PlanRow]) -> list[PlanRow]:
    """Of the deployments that carry the target load, those no cheaper one beats on TTFT p99 there."""
    carried = [r for r in table if r.measured.at_target is not None and r.measured.at_target.ttft_p99_s is not None]
    front, best = [], float("inf")
    for row in sorted(carried, key=lambda r: (r.cost, _ttft(r))):
        if _ttft(row) < best:
            front.append(row)
            best = _ttft(row)
    return front


def _ttft(row: PlanRow) -> float:
    trial = row.measured.at_target
    return trial.ttft_p99_s if trial is not None and trial.ttft_p99_s is not None else float("inf")


def cheapest(table: Sequence[PlanRow], target: float) -> PlanRow | None:
    """The cheapest deployment whose capacity reaches `target` requests a second (the larger on a tie)."""
    able = [r for r in table if r.measured.capacity is not None and r.measured.capacity >= target]
    return min(able, key=lambda r: (r.cost, -(r.measured.capacity or 0)), default=None)


def in_words(row: PlanRow, target: float) -> list[str]:
    """What binds the chosen deployment at the target load, pool by pool, and what its link carries."""
    trial: Trial | None = row.measured.at_target
    if trial is None:
        return []
    lines = []
    for pool in trial.pools:
        kind = "memory-bound" if pool.memory_bound >= 0.5 else "compute-bound"
        lines.append(f"{pool.pool} is {kind} on {pool.accelerator}: busy {pool.busy:.0%} of the time, MBU "
                     f"{pool.mbu:.0%}, MFU {pool.mfu:.0%} ({pool.memory_bound:.0%} of its step time memory-bound)")
    deployment = row.measured.deployment
    if deployment.prefill is not None and trial.kv_bytes_per_s:
        link = LINKS[deployment.link]
        lanes = min(deployment.prefill.devices, deployment.decode.devices)
        share = trial.kv_bytes_per_s / (link.bytes_per_s * lanes)
        lines.append(f"the link carries {trial.kv_bytes_per_s / 1e9:.1f} GB/s of KV at {target:g} req/s, "
                     f"{share:.1%} of {lanes} × {deployment.link} ({link.bytes_per_s / 1e9:.0f} GB/s each)")
    return lines
