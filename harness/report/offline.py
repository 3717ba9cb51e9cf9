"""`harness report RUN_DIR`: the summary rebuilt offline from a run's saved records and scenario."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import __version__
from harness.config.scenario import ClientConfig, Scenario, load_scenario
from harness.errors import ScenarioError
from harness.records import RequestRecord, read_records
from harness.stats.keep import PhaseKeep, RunSample, next_phase
from harness.stats.schema import Summary
from harness.stats.server import Row, read_server_metrics
from harness.stats.summary import PhaseRun, build_summary
from harness.stats.verdict import ClientCheck


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A run's summary recomputed, with the records and server series it came from (read once, for the report)."""

    summary: Summary
    records: list[RequestRecord]
    rows: list[Row]
    every: int = 1  # `records` holds 1 in `every`: the run has more than its client.records_in_memory


def saved_check(saved_phase: dict[str, Any], cfg: ClientConfig) -> ClientCheck:
    """A phase's self-check as its summary.json kept it: the live verdicts are not in the records."""
    client = saved_phase.get("client") or {}
    return ClientCheck(client.get("loop_lag_p99_ms"), client.get("cpu_share"), cfg.loop_lag_bound_ms,
                       cfg.cpu_bound, client.get("cpu_seconds"), client.get("runq_share"),
                       client.get("load_per_core"), client.get("verdict", "ok"),
                       saved_phase.get("client_limited_reason") or "")


def rebuild(run_dir: Path, warn: Callable[[str], None] | None = None) -> Rebuilt:
    """Statistics recomputed from `requests.jsonl` with the run's own `scenario.yaml`.

    Server series come from the run's `server_metrics.csv`. The run header and each phase's self-check
    readings (which records cannot recreate) are taken from the saved `summary.json` when there is one.
    """
    records_path = run_dir / "requests.jsonl"
    if not records_path.is_file():
        raise ScenarioError(f"{run_dir}: no requests.jsonl: not a run directory")
    scenario = load_scenario(run_dir / "scenario.yaml")
    saved: dict[str, Any] = {}
    if (run_dir / "summary.json").is_file():
        saved = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    saved_phases = {p["name"]: p for p in saved.get("phases", [])}
    kept = _keep(scenario, read_records(records_path, warn))
    cfg = scenario.client
    phases = []
    ceiling = None
    for phase in scenario.phases:
        keep = kept.phases.get(phase.name)
        if keep is None:
            continue
        saved_phase = saved_phases.get(phase.name, {})
        ceiling = (saved_phase.get("client") or {}).get("ceiling_tokens_per_s", ceiling)
        phases.append(PhaseRun(phase, keep.held, saved_check(saved_phase, cfg), saved_phase.get("trace"),
                               let_go=keep.let_go))
    # Without a saved summary the run never finished (killed): say so rather than leave the header blank.
    header = saved.get("run") or {"run_id": "unknown", "scenario": scenario.name, "harness_version": __version__,
                                  "seed": scenario.seed, "complete": False}
    rows = read_server_metrics(run_dir)
    summary = build_summary(scenario, header, phases, rows, saved.get("server_metrics"), ceiling)
    return Rebuilt(summary, kept.run.records, rows, kept.run.every)


@dataclass
class _Kept:
    phases: dict[str, PhaseKeep]
    run: RunSample


def _keep(scenario: Scenario, records: Iterable[RequestRecord]) -> _Kept:
    """The records as the run held them, in the order it took them: the same records_in_memory, the same
    phases folded the same way (a phase closes when the next one's first record comes), so a rebuilt summary
    equals the run's own."""
    cap, config = scenario.client.records_in_memory, {p.name: p for p in scenario.phases}
    kept = _Kept({}, RunSample(cap))
    current: PhaseKeep | None = None
    for rec in records:
        keep = kept.phases.get(rec.phase)
        if keep is None:
            phase = config.get(rec.phase)
            keep = next_phase(scenario.slo, cap, kept.run, phase.warmup_s if phase else 0.0,
                              phase.cooldown_s if phase else 0.0)
            kept.phases[rec.phase] = keep
        if keep is not current:
            if current is not None:
                current.close()
            current = keep
        keep.add(rec)
        kept.run.add(rec)
    if current is not None:
        current.close()
    return kept
