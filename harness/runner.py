"""Runs a scenario: phases in order, records to disk as they come, a summary at the end."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import __version__
from harness.client import Api, Endpoint, OpenAIBackend, list_models, open_session, warm_connections
from harness.clock import Clock, MonotonicClock
from harness.dispatch import Dispatcher
from harness.errors import HarnessError
from harness.plan import BatchPlan, ClosedLoopPlan, PhasePlan, peak_connections, plan_phase
from harness.records import RecordWriter, RequestRecord
from harness.scenario import Scenario
from harness.simproc import bundled_simulator
from harness.stats import SLO, summarize_phase

SUMMARY_SCHEMA = "harness.summary/1"
_WARM_MAX = 256  # connections opened ahead of a phase; an open-loop phase may need more later


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    summary: dict[str, Any]


def new_run_dir(reports_dir: Path, scenario_name: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = reports_dir / f"{stamp}-{scenario_name}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = reports_dir / f"{stamp}-{scenario_name}-{suffix}"
    return path


async def _run_plan(dispatcher: Dispatcher, plan: PhasePlan) -> list[RequestRecord]:
    if isinstance(plan, BatchPlan):
        return await dispatcher.fixed_batch(plan.batches)
    if isinstance(plan, ClosedLoopPlan):
        return await dispatcher.closed_loop(plan.specs, plan.concurrency, plan.think_ns)
    return await dispatcher.open_loop(plan.specs, plan.offsets_ns.tolist())


def _header(scenario: Scenario, endpoint: Endpoint, run_id: str, clock: Clock, bundled: bool) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "scenario": scenario.name,
        "harness_version": __version__,
        "seed": scenario.seed,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        # One wall-clock anchor: monotonic_ns of the records + (wall_ns - monotonic_ns) = wall time.
        "anchor": {"monotonic_ns": clock.now_ns(), "wall_ns": time.time_ns()},
        "endpoint": {"base_url": endpoint.base_url, "model": endpoint.model, "api": endpoint.api,
                     "bundled_simulator": bundled},
        "simulator": scenario.simulator.model_dump() if bundled else None,
    }


async def run_scenario(
    scenario: Scenario, endpoint: Endpoint, run_dir: Path, *, bundled: bool = False, clock: Clock | None = None,
) -> RunResult:
    clock = clock or MonotonicClock()
    run_id = secrets.token_hex(4)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(scenario.to_yaml(), encoding="utf-8")
    plans = [plan_phase(scenario, i, run_id) for i in range(len(scenario.phases))]
    header = _header(scenario, endpoint, run_id, clock, bundled)
    slo = SLO(scenario.slo.ttft_ms, scenario.slo.tpot_ms, scenario.slo.e2e_ms)
    phases: list[dict[str, Any]] = []
    cfg = scenario.client
    session = open_session(max(peak_connections(p) for p in plans), cfg.connect_timeout_s, cfg.request_timeout_s)
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "run": header, "phases": phases}
    try:
        with RecordWriter(run_dir) as writer:
            dispatcher = Dispatcher(OpenAIBackend(endpoint, session, clock), clock, writer.write)
            for phase, plan in zip(scenario.phases, plans, strict=True):
                await warm_connections(session, endpoint.base_url, min(peak_connections(plan), _WARM_MAX),
                                       endpoint.api_key)
                records = await _run_plan(dispatcher, plan)
                phases.append({"name": phase.name, "load": phase.load.model_dump(),
                               **summarize_phase(records, slo, cfg.schedule_lag_bound_ms)})
    finally:
        await session.close()
        summary["run"]["complete"] = len(phases) == len(plans)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return RunResult(run_dir, summary)


async def resolve_and_run(
    scenario: Scenario, reports_dir: Path, *, url: str | None, model: str | None, api: Api | None,
    api_key: str | None,
) -> RunResult:
    """Run against `url`, or against a bundled simulator started for this run when it is None."""
    api = api or scenario.endpoint.api
    url = url or scenario.endpoint.url
    model = model or scenario.endpoint.model
    run_dir = new_run_dir(reports_dir, scenario.name)
    if url is None:
        async with bundled_simulator(scenario.simulator) as (sim_url, sim_model):
            endpoint = Endpoint(sim_url, model or sim_model, api, None)
            return await run_scenario(scenario, endpoint, run_dir, bundled=True)
    async with open_session(1, scenario.client.connect_timeout_s, 30) as session:
        served = await list_models(session, url, api_key)
    if model is None:
        if not served:
            raise HarnessError(f"{url} serves no models; pass --model")
        model = served[0]
    return await run_scenario(scenario, Endpoint(url, model, api, api_key), run_dir)
