"""summary.json put together: each phase's entry from the scenario and its records, then what joins the
phases (server series, the comparison). One way for a live run, `harness report` and `harness predict`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.records import RequestRecord
from harness.report.conclusion import comparisons, sentences
from harness.scenario import Phase, Scenario
from harness.servermetrics import Row, attach_server
from harness.stats import SLO, ClientCheck, summarize_phase

SUMMARY_SCHEMA = "harness.summary/1"


def phase_summary(scenario: Scenario, phase: Phase, records: Sequence[RequestRecord],
                  client: ClientCheck | None = None) -> dict[str, Any]:
    slo = SLO(scenario.slo.ttft_ms, scenario.slo.tpot_ms, scenario.slo.e2e_ms)
    return {"name": phase.name, "config": phase.model_dump(mode="json"),
            **summarize_phase(records, slo, scenario.client.schedule_lag_bound_ms, warmup_s=phase.warmup_s,
                              cooldown_s=phase.cooldown_s, client=client)}


def finish_summary(summary: dict[str, Any], rows: Sequence[Row] = ()) -> None:
    attach_server(summary["phases"], rows)
    comps = comparisons(summary)
    summary["comparison"] = {"phases": comps, "conclusion": sentences(comps)}
