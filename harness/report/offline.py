"""`harness report RUN_DIR`: the summary rebuilt offline from a run's saved records and scenario."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.config.scenario import Scenario, load_scenario
from harness.errors import ScenarioError
from harness.records import RequestRecord
from harness.records_read import read_run_records
from harness.run.header import unknown_header
from harness.stats.keep import PhaseKeep, RunSample, next_phase
from harness.stats.schema import Summary, read_summary
from harness.stats.server import Row, read_server_metrics
from harness.stats.summary import PhaseRun, build_summary
from harness.stats.verdict import saved_check
from harness.voice import QUIET, Voice


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A run's summary recomputed, with the records and server series it came from (read once, for the
    report)."""

    summary: Summary
    records: list[RequestRecord]
    rows: list[Row]
    every: int = 1  # `records` holds 1 in `every`: the run has more than its client.records_in_memory


def rebuild(run_dir: Path, voice: Voice = QUIET) -> Rebuilt:
    """Statistics recomputed from `requests.jsonl` with the run's own `scenario.yaml`.

    Server series come from the run's `server_metrics.csv`. The run header and each phase's self-check
    readings (which records cannot recreate) are taken from the saved `summary.json` when there is one.
    """
    records_path = run_dir / "requests.jsonl"
    if not records_path.is_file():
        raise ScenarioError(f"{run_dir}: no requests.jsonl: not a run directory")
    scenario = load_scenario(run_dir / "scenario.yaml")
    saved = read_summary(run_dir / "summary.json") if (run_dir / "summary.json").is_file() else None
    saved_phases = {p.name: p for p in saved.phases} if saved else {}
    kept = _keep(scenario, read_run_records(run_dir, voice))
    cfg = scenario.client
    phases = []
    ceiling = None
    for phase in scenario.phases:
        keep = kept.phases.get(phase.name)
        if keep is None:
            continue
        saved_phase = saved_phases.get(phase.name)
        if saved_phase is not None and saved_phase.client.ceiling_tokens_per_s is not None:
            ceiling = saved_phase.client.ceiling_tokens_per_s
        phases.append(PhaseRun(phase, keep.held, saved_check(saved_phase, cfg.loop_lag_bound_ms, cfg.cpu_bound,
                                                               cfg.max_shift),
                               saved_phase.trace if saved_phase else None, let_go=keep.let_go))
    # Without a saved summary the run never finished (killed): say so rather than leave the header blank.
    header = saved.run if saved else unknown_header(scenario)
    rows = read_server_metrics(run_dir)
    summary = build_summary(scenario, header, phases, rows, saved.server_metrics if saved else None, ceiling)
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
