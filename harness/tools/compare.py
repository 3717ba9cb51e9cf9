"""`harness compare`: two sides (a run directory, or a directory of repeated runs each), phase by phase.

Reads each run's summary.json, scenario.yaml and requests.jsonl; refuses sides whose scenario, workload or
phases differ (the comparison would mean nothing), unless forced; then compares every metric with
`harness.stats.compare`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ScenarioError
from harness.records import RequestRecord, read_records
from harness.report.files import run_dirs
from harness.stats.compare import (
    DEFAULT_TOLERANCES,
    METRICS,
    REPEATS_FOR_RUN_LEVEL,
    Block,
    PhaseComparison,
    across_runs,
    blocks,
    bootstrap,
    value,
)


@dataclass(frozen=True, slots=True)
class Run:
    path: Path
    summary: dict[str, Any]
    scenario: dict[str, Any]
    blocks: dict[str, list[Block]]  # phase → its measured requests in blocks


def _load_run(path: Path) -> Run:
    try:
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        scenario = yaml.safe_load((path / "scenario.yaml").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: not a run directory ({exc})") from None
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in read_records(path / "requests.jsonl"):
        by_phase.setdefault(rec.phase, []).append(rec)
    cut = {p["name"]: blocks(by_phase.get(p["name"], []), p["window"]["start_ns"], p["window"]["end_ns"])
           for p in summary["phases"]}
    return Run(path, summary, scenario, cut)


def load_runs(paths: Sequence[Path]) -> list[Run]:
    return [_load_run(p) for p in paths]


def load_side(path: Path) -> list[Run]:
    """A run directory, or a directory holding run directories (repeats), in name order."""
    return load_runs(run_dirs(path))


def _shape(run: Run) -> dict[str, Any]:
    """What must match for a comparison to mean something: scenario name, workload, phases and their loads."""
    s = run.scenario
    return {"scenario": s.get("name"), "workload": s.get("workload"),
            "phases": [{k: v for k, v in p.items() if k != "thresholds"} for p in s.get("phases", [])]}


def refusal(base: Sequence[Run], current: Sequence[Run]) -> str | None:
    """Why the two sides are not comparable (None: they are)."""
    shapes = [(run.path, _shape(run)) for run in [*base, *current]]
    first_path, first = shapes[0]
    for path, shape in shapes[1:]:
        for key in ("scenario", "workload", "phases"):
            if shape[key] != first[key]:
                return f"{key} differs between {first_path} and {path}"
    return None


def tolerances(overrides: Mapping[str, float]) -> dict[str, float]:
    unknown = sorted(set(overrides) - set(METRICS))
    if unknown:
        raise ValueError(f"{unknown[0]!r}: not a compared metric; one of {', '.join(METRICS)}")
    return {**DEFAULT_TOLERANCES, **overrides}


def compare_sides(base: Sequence[Run], current: Sequence[Run], limits: Mapping[str, float],
                  seed: int = 0) -> list[PhaseComparison]:
    """Every phase both sides ran, every metric in `limits`: run-level with enough repeats on both sides,
    else a block bootstrap over the blocks of all runs of each side."""
    phases = [p["name"] for p in base[0].summary["phases"]
              if all(p["name"] in r.blocks for r in [*base, *current])]
    out = []
    run_level = min(len(base), len(current)) >= REPEATS_FOR_RUN_LEVEL
    for phase in phases:
        for k, (metric, tolerance) in enumerate(limits.items()):
            if run_level:
                b = [value(metric, r.blocks[phase]) for r in base]
                c = [value(metric, r.blocks[phase]) for r in current]
                if None not in b and None not in c:
                    out.append(PhaseComparison(phase, across_runs(metric, b, c, tolerance)))  # type: ignore[arg-type]
                    continue
            pooled_b = [blk for r in base for blk in r.blocks[phase]]
            pooled_c = [blk for r in current for blk in r.blocks[phase]]
            out.append(PhaseComparison(phase, bootstrap(metric, pooled_b, pooled_c, tolerance, seed + k)))
    return out
