"""`harness report RUN_DIR`: the summary rebuilt offline from a run's saved records and scenario."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import __version__
from harness.config.scenario import ClientConfig, load_scenario
from harness.errors import ScenarioError
from harness.records import RequestRecord, read_records
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
    all_records = list(read_records(records_path, warn))
    by_phase: dict[str, list[RequestRecord]] = {}
    for rec in all_records:
        by_phase.setdefault(rec.phase, []).append(rec)
    cfg = scenario.client
    phases = []
    ceiling = None
    for phase in scenario.phases:
        records = by_phase.get(phase.name, [])
        if not records:
            continue
        saved_phase = saved_phases.get(phase.name, {})
        ceiling = (saved_phase.get("client") or {}).get("ceiling_tokens_per_s", ceiling)
        phases.append(PhaseRun(phase, records, saved_check(saved_phase, cfg), saved_phase.get("trace")))
    # Without a saved summary the run never finished (killed): say so rather than leave the header blank.
    header = saved.get("run") or {"run_id": "unknown", "scenario": scenario.name, "harness_version": __version__,
                                  "seed": scenario.seed, "complete": False}
    rows = read_server_metrics(run_dir)
    summary = build_summary(scenario, header, phases, rows, saved.get("server_metrics"), ceiling)
    return Rebuilt(summary, all_records, rows)
