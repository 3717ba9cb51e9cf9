"""summary.json put together in one place: each phase's entry from its records, then what joins the
phases (server series, the comparison). One way for a live run, `harness report` and `harness predict`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.config.scenario import Phase, Scenario
from harness.records import RequestRecord
from harness.stats.conclusion import comparisons, sentences
from harness.stats.phase import ClientCheck, summarize_phase
from harness.stats.server import Row, attach_server

SUMMARY_SCHEMA = "harness.summary/1"


@dataclass(frozen=True, slots=True)
class PhaseRun:
    """What one phase left behind: its records, the client's self-check while it ran, the trace it replayed."""

    phase: Phase
    records: Sequence[RequestRecord]
    client: ClientCheck | None = None
    trace: dict[str, Any] | None = None


def phase_summary(scenario: Scenario, run: PhaseRun, ceiling_tokens_per_s: float | None = None) -> dict[str, Any]:
    phase = run.phase
    summary = {"name": phase.name, "config": phase.model_dump(mode="json"),
               **summarize_phase(run.records, scenario.slo, scenario.client.schedule_lag_bound_ms,
                                 warmup_s=phase.warmup_s, cooldown_s=phase.cooldown_s, client=run.client)}
    if ceiling_tokens_per_s is not None:
        # How close this phase came to what `harness calibrate` found this machine's client can take.
        summary["client"]["ceiling_tokens_per_s"] = ceiling_tokens_per_s
        summary["client"]["ceiling_share"] = (summary["whole_run"]["throughput"]["output_tokens_per_s"]
                                              / ceiling_tokens_per_s)
    if run.trace is not None:
        summary["trace"] = run.trace
    return summary


def build_summary(scenario: Scenario, header: dict[str, Any], phases: Sequence[PhaseRun], rows: Sequence[Row] = (),
                  scraped: dict[str, Any] | None = None, ceiling_tokens_per_s: float | None = None
                  ) -> dict[str, Any]:
    """The whole summary: header, phases, server series when scraped, and the comparison of the phases."""
    entries = [phase_summary(scenario, p, ceiling_tokens_per_s) for p in phases]
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "run": header, "phases": entries}
    if scraped is not None:
        summary["server_metrics"] = scraped
    attach_server(entries, rows)
    comps = comparisons(summary)
    summary["comparison"] = {"phases": comps, "conclusion": sentences(comps)}
    return summary
