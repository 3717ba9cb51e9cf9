"""`harness compare`: two sides (run directories, directories of repeated runs, or runs kept in the history),
phase by phase.

A side is a list of `Run`s: what a comparison needs of each run and nothing else — its id, the shape of its
scenario (to refuse comparing unlike things), and per phase its measured requests in blocks, whether the
client limited it, and its thresholds. A `Run` comes from a run directory (summary.json, scenario.yaml,
requests.jsonl) or from the history, which keeps the same (harness.tools.history), so old folders are
optional.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config.metric_registry import COMPARED, DEFAULT_TOLERANCES
from harness.config.metric_registry import metric as entry
from harness.errors import ScenarioError
from harness.records import RequestRecord
from harness.records_read import read_run_records, run_dirs
from harness.stats.compare import (
    JUDGED,
    ONLY_WHEN_MEASURED,
    REPEATS_FOR_RUN_LEVEL,
    Block,
    MetricChange,
    PhaseChange,
    across_runs,
    blocks,
    bootstrap,
    corrected,
    too_few,
    value,
    widened,
)
from harness.stats.noise import ALPHA, MIN_BEYOND, RunSpread
from harness.stats.schema import ThresholdResult, read_summary
from harness.yamlfile import read_yaml


@dataclass(frozen=True, slots=True)
class PhaseBlocks:
    blocks: list[Block]  # the measured requests, in blocks of consecutive time (or one a batch)
    client_limited: str | None  # why the harness could not keep up (None: it could)
    thresholds: list[ThresholdResult] = field(default_factory=list)
    limited_metrics: tuple[str, ...] = ()  # the figures it could have moved (empty with client_limited: all)

    def untrusted(self, metric: str) -> bool:
        return self.client_limited is not None and (not self.limited_metrics or metric in self.limited_metrics)


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    where: str  # the run directory, or the history file it was read from
    shape: dict[str, Any]  # what must match for a comparison to mean something
    phases: dict[str, PhaseBlocks]  # in the order the run ran them


def shape_of(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Scenario name, workload, phases and their loads (thresholds may change without making runs unlike)."""
    return {"scenario": scenario.get("name"), "workload": scenario.get("workload"),
            "phases": [{k: v for k, v in p.items() if k != "thresholds"} for p in scenario.get("phases", [])]}


def _load_run(path: Path) -> Run:
    summary = read_summary(path / "summary.json")
    try:
        scenario = read_yaml(path / "scenario.yaml")
    except ValueError as exc:
        raise ScenarioError(f"{path}: not a run directory (scenario.yaml: {exc})") from None
    if not isinstance(scenario, dict):
        raise ScenarioError(f"{path}: not a run directory (scenario.yaml holds no scenario)")
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in read_run_records(path):
        by_phase.setdefault(rec.phase, []).append(rec)
    phases = {p.name: PhaseBlocks(blocks(by_phase.get(p.name, []), p.window.start_ns, p.window.end_ns),
                                  (p.client_limited_reason or "late") if p.client_limited else None, p.thresholds,
                                  tuple(p.client_limited_metrics))
              for p in summary.phases}
    return Run(summary.run.run_id, str(path), shape_of(scenario), phases)


def load_runs(paths: Sequence[Path]) -> list[Run]:
    return [_load_run(p) for p in paths]


def load_side(path: Path) -> list[Run]:
    """A run directory, or a directory holding run directories (repeats), in name order."""
    return load_runs(run_dirs(path))


def refusal(base: Sequence[Run], current: Sequence[Run]) -> str | None:
    """Why the two sides are not comparable (None: they are)."""
    first, *rest = [*base, *current]
    for run in rest:
        for key in ("scenario", "workload", "phases"):
            if run.shape[key] != first.shape[key]:
                return f"{key} differs between {first.where} and {run.where}"
    return None


def tolerances(overrides: Mapping[str, float]) -> dict[str, float]:
    unknown = sorted(set(overrides) - set(COMPARED))
    if unknown:
        raise ValueError(f"{unknown[0]!r}: not a compared metric; one of {', '.join(COMPARED)}")
    return {**DEFAULT_TOLERANCES, **overrides}


def untrusted(phase: str, metric: str, runs: Sequence[Run]) -> str | None:
    """Why a phase's figure cannot be trusted on these runs: the client could have moved it in one of them."""
    late = [(r.run_id, r.phases[phase].client_limited) for r in runs if r.phases[phase].untrusted(metric)]
    if not late:
        return None
    (run_id, why), others = late[0], len(late) - 1
    return f"the client limited run {run_id} ({why})" + (f" and {others} more" if others else "")


def measured(phase: str, name: str, runs: Sequence[Run]) -> bool:
    """A figure some run measured, or one always shown (a figure of ONLY_WHEN_MEASURED is one only where some
    run of either side measured it: the answer's TTFT where a model thought first)."""
    latency = entry(name).latency
    return latency not in ONLY_WHEN_MEASURED or any(
        len(b.latencies[latency]) for r in runs for b in r.phases[phase].blocks)


Noise = Mapping[tuple[str, str], RunSpread]  # (phase, metric) → one run's spread in the history


def _one(phase: str, metric: str, tolerance: float, base: Sequence[Run], current: Sequence[Run], seed: int,
         noise: Noise) -> MetricChange:
    """One metric of one phase: run-level with enough repeats on both sides, else a block bootstrap over the
    blocks of all runs of each side; widened to the history's run-to-run noise; a percentile with too few
    samples beyond it does not vote."""
    result = None
    if min(len(base), len(current)) >= REPEATS_FOR_RUN_LEVEL:
        b = [value(metric, r.phases[phase].blocks) for r in base]
        c = [value(metric, r.phases[phase].blocks) for r in current]
        if None not in b and None not in c:
            result = across_runs(metric, b, c, tolerance)  # type: ignore[arg-type]
    if result is None:
        pooled_b = [blk for r in base for blk in r.phases[phase].blocks]
        pooled_c = [blk for r in current for blk in r.phases[phase].blocks]
        result = bootstrap(metric, pooled_b, pooled_c, tolerance, seed)
    if result.verdict not in JUDGED:
        return result
    short = too_few(metric, [r.phases[phase].blocks for r in base], [r.phases[phase].blocks for r in current])
    if short is not None:
        return dataclasses.replace(result, verdict="inconclusive", note=short)
    spread_ = noise.get((phase, metric))
    if spread_ is not None:
        result = widened(result, spread_, len(base), len(current))
    return result


def compare_sides(base: Sequence[Run], current: Sequence[Run], limits: Mapping[str, float],
                  seed: int = 0, noise: Noise | None = None) -> list[PhaseChange]:
    """Every phase both sides ran, every metric in `limits` (see `_one`); then Holm's correction over every
    metric judged, so that the many metrics of one comparison do not raise a regression by chance. A figure
    the client could have moved in a run of either side is compared all the same, for information:
    "untrusted"."""
    phases = [p for p in base[0].phases if all(p in r.phases for r in [*base, *current])]
    out = []
    for phase in phases:
        for k, (metric, tolerance) in enumerate(limits.items()):
            if not measured(phase, metric, [*base, *current]):
                continue
            result = _one(phase, metric, tolerance, base, current, seed + k, noise or {})
            why = untrusted(phase, metric, [*base, *current])
            if why is not None and result.verdict in JUDGED:  # one that would not vote anyway keeps its reason
                result = dataclasses.replace(result, verdict="untrusted", note=why)
            out.append(PhaseChange(phase, result))
    return corrected(out)


def how_much(base: Sequence[Run], current: Sequence[Run], noise: Noise | None = None) -> str:
    """How the intervals were made, the rules that keep many metrics from alarming by chance, and what the
    intervals cannot see."""
    rules = (f"a percentile votes only with {MIN_BEYOND} samples beyond it a side (p99: 1,000); a regression "
             f"must hold after Holm's correction over every metric judged (family-wise {ALPHA:.0%})")
    if noise:
        runs = max(s.runs for s in noise.values())
        rules = f"each interval at least as wide as the history's run-to-run spread (up to {runs} runs); " + rules
    if min(len(base), len(current)) >= REPEATS_FOR_RUN_LEVEL:
        return f"Welch t over runs ({len(base)} vs {len(current)}); {rules}"
    blind = "" if noise else (
        f". With fewer than {REPEATS_FOR_RUN_LEVEL} runs a side and no history the interval holds only the noise "
        "within runs, not between them (another start, another placement): --baseline-from-history, or "
        f"--repeat {REPEATS_FOR_RUN_LEVEL} on both sides")
    return (f"block bootstrap over time windows of each run (1,000 resamples; {len(base)} vs {len(current)} "
            f"run{'s' * (len(current) > 1)}); {rules}{blind}")
