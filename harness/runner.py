"""Runs a scenario: phases in order, records to disk as they come, a summary at the end."""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from harness import __version__
from harness.calibration_store import load_calibration
from harness.client import Api, Endpoint, OpenAIBackend, PooledBackend, list_models, open_session
from harness.clock import Clock, MonotonicClock
from harness.dispatch import Dispatcher
from harness.errors import HarnessError
from harness.h1client import H1Backend
from harness.plan import (
    BatchPlan,
    ClosedLoopPlan,
    OpenLoopPlan,
    PhasePlan,
    peak_connections,
    plan_phase,
    text_maker,
)
from harness.progress import Progress
from harness.records import RecordWriter, RequestRecord, write_parquet
from harness.report.files import write_reports
from harness.scenario import ClientConfig, Phase, Scenario
from harness.scrape import ServerScraper
from harness.selfcheck import SelfCheck
from harness.servermetrics import metrics_url, same_origin
from harness.simproc import bundled_simulator
from harness.stats import ClientCheck
from harness.summary import SUMMARY_SCHEMA, finish_summary, phase_summary

Warn = Callable[[str], None]
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


async def _run_plan(dispatcher: Dispatcher, plan: PhasePlan, grace_s: float) -> list[RequestRecord]:
    if isinstance(plan, BatchPlan):
        return await dispatcher.fixed_batch(plan.batches, grace_s)
    if isinstance(plan, ClosedLoopPlan):
        return await dispatcher.closed_loop(plan.source.stream(plan.requests), plan.concurrency, plan.think_ns,
                                            plan.duration_ns, grace_s, plan.stagger_ns)
    return await dispatcher.open_loop(plan.specs, plan.offsets_ns.tolist(), plan.max_in_flight, grace_s)


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


class _Stopper:
    """Ctrl-C / SIGTERM: the first stops sending and lets requests in flight finish within the grace
    period; the second cancels them at once. Either way every record taken is written."""

    def __init__(self, dispatcher: Dispatcher, warn: Warn) -> None:
        self.dispatcher = dispatcher
        self.warn = warn
        self.signal: str | None = None
        self._main = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._installed: list[signal.Signals] = []

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
                self._installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or no signals on this platform: nothing to install

    def remove(self) -> None:
        for sig in self._installed:
            self._loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.signal is None:
            self.signal = sig.name
            self.warn(f"{sig.name}: stopped sending; waiting for requests in flight (again to cancel them)")
            self.dispatcher.stop()
        elif self._main is not None:
            self._main.cancel()


def make_backend(endpoint: Endpoint, clock: Clock, cfg: ClientConfig, max_connections: int) -> PooledBackend:
    if cfg.http == "h1":
        return H1Backend(endpoint, clock, max_connections, cfg.connect_timeout_s, cfg.request_timeout_s,
                         cfg.first_token_timeout_s, cfg.continuous_usage)
    session = open_session(max_connections, cfg.connect_timeout_s, cfg.request_timeout_s)
    return OpenAIBackend(endpoint, session, clock, cfg.first_token_timeout_s, cfg.continuous_usage)


def _phase_summary(scenario: Scenario, phase: Phase, records: list[RequestRecord],
                   check: ClientCheck) -> dict[str, Any]:
    summary = phase_summary(scenario, phase, records, check)
    calibration = load_calibration()
    if calibration is not None:
        # How close this phase came to what `harness calibrate` found this machine's client can take.
        ceiling = calibration["ceiling"]["output_tokens_per_s"]
        summary["client"]["ceiling_tokens_per_s"] = ceiling
        summary["client"]["ceiling_share"] = summary["whole_run"]["throughput"]["output_tokens_per_s"] / ceiling
    return summary


def _scraper(scenario: Scenario, endpoint: Endpoint, clock: Clock, run_dir: Path) -> ServerScraper | None:
    cfg = scenario.endpoint
    if cfg.scrape_interval_s == 0:
        return None
    url = cfg.metrics_url or metrics_url(endpoint.base_url)
    # The key goes only where the requests go: a metrics URL on another host never sees it.
    key = endpoint.api_key if same_origin(url, endpoint.base_url) else None
    return ServerScraper(url, clock, cfg.scrape_interval_s, run_dir, key)


class _Sink:
    """Where each finished record goes: to disk at once, to its phase, to the run, to the progress line."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self.phase: list[RequestRecord] = []
        self.run: list[RequestRecord] = []
        self.progress: Progress | None = None

    def __call__(self, rec: RequestRecord) -> None:
        self.writer.write(rec)
        self.phase.append(rec)
        self.run.append(rec)
        if self.progress is not None:
            self.progress.record(rec)

    def begin_phase(self, name: str) -> None:
        self.phase = []
        if self.progress is not None:
            self.progress.begin_phase(name)


async def _run_phases(scenario: Scenario, plans: list[PhasePlan], dispatcher: Dispatcher, backend: PooledBackend,
                      sink: _Sink, check: SelfCheck, phases: list[dict[str, Any]]) -> None:
    """Phases in order until done or stopped; each phase's summary is added even when it is cut short."""
    cfg = scenario.client
    for phase, plan in zip(scenario.phases, plans, strict=True):
        if dispatcher.stopping:
            break
        await backend.warm(min(peak_connections(plan), _WARM_MAX))
        sink.begin_phase(phase.name)
        mark = check.mark()
        try:
            await _run_plan(dispatcher, plan, cfg.stop_grace_s)
        finally:
            if sink.phase:
                phases.append(_phase_summary(scenario, phase, sink.phase, check.since(mark)))
                if isinstance(plan, OpenLoopPlan) and plan.trace is not None:
                    phases[-1]["trace"] = plan.trace


async def run_scenario(
    scenario: Scenario, endpoint: Endpoint, run_dir: Path, *, bundled: bool = False, clock: Clock | None = None,
    warn: Warn | None = None, progress_to: TextIO | None = None,
) -> RunResult:
    clock = clock or MonotonicClock()
    warn = warn or (lambda message: None)
    run_id = secrets.token_hex(4)
    text = text_maker(scenario)  # a bad trace, dataset or tokenizer fails here, before any report exists
    plans = [plan_phase(scenario, i, run_id, text) for i in range(len(scenario.phases))]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(scenario.to_yaml(), encoding="utf-8")
    header = _header(scenario, endpoint, run_id, clock, bundled)
    phases: list[dict[str, Any]] = []
    cfg = scenario.client
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA, "run": header, "phases": phases}
    check = SelfCheck(clock, cfg.loop_lag_bound_ms, cfg.cpu_bound, warn)
    backend = make_backend(endpoint, clock, cfg, max(peak_connections(p) for p in plans))
    saved_records: list[RequestRecord] = []
    scraper = _scraper(scenario, endpoint, clock, run_dir)
    if scraper is not None:
        scraper.start()
    try:
        with RecordWriter(run_dir) as writer:
            sink = _Sink(writer)
            dispatcher = Dispatcher(backend, clock, sink)
            if progress_to is not None:
                sink.progress = Progress(clock, progress_to, lambda: dispatcher.launched)
                sink.progress.start()
            stopper = _Stopper(dispatcher, warn)
            stopper.install()
            check.start()
            try:
                await _run_phases(scenario, plans, dispatcher, backend, sink, check, phases)
            finally:
                stopper.remove()
                if sink.progress is not None:
                    await sink.progress.stop()
                header["stopped"] = stopper.signal
                if sink.run:
                    write_parquet(run_dir / "requests.parquet", sink.run)
                    saved_records.extend(sink.run)
    finally:
        await check.stop()
        await backend.close()
        if scraper is not None:
            summary["server_metrics"] = await scraper.stop()
        header["complete"] = len(phases) == len(plans) and header.get("stopped") is None
        rows = scraper.rows if scraper is not None else []
        finish_summary(summary, rows)
        write_reports(summary, run_dir, saved_records, rows)
    return RunResult(run_dir, summary)


@asynccontextmanager
async def target(scenario: Scenario, *, url: str | None, model: str | None, api: Api | None,
                 api_key: str | None, pin: bool = False) -> AsyncIterator[tuple[Endpoint, bool]]:
    """The endpoint to drive and whether it is a bundled simulator, started here when `url` is None and
    stopped on exit; a given URL is asked for its models first, so a wrong one fails before any load."""
    api = api or scenario.endpoint.api
    url = url or scenario.endpoint.url
    model = model or scenario.endpoint.model
    if url is None:
        async with bundled_simulator(scenario.simulator, pin=pin) as (sim_url, sim_model):
            yield Endpoint(sim_url, model or sim_model, api, None), True
        return
    async with open_session(1, scenario.client.connect_timeout_s, 30) as session:
        served = await list_models(session, url, api_key)
    if model is None:
        if not served:
            raise HarnessError(f"{url} serves no models; pass --model")
        model = served[0]
    yield Endpoint(url, model, api, api_key), False


async def resolve_and_run(
    scenario: Scenario, reports_dir: Path, *, url: str | None, model: str | None, api: Api | None,
    api_key: str | None, warn: Warn | None = None, pin: bool = False, progress_to: TextIO | None = None,
) -> RunResult:
    """Run against `url`, or against a bundled simulator started for this run when it is None."""
    async with target(scenario, url=url, model=model, api=api, api_key=api_key, pin=pin) as (endpoint, bundled):
        return await run_scenario(scenario, endpoint, new_run_dir(reports_dir, scenario.name), bundled=bundled,
                                  warn=warn, progress_to=progress_to)
