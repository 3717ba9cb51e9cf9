"""Runs a scenario against an endpoint: phases in order, records to disk as they come, a summary at the end.

The runner only runs. Which endpoint (run.target), which backend (client.backends), what to do with
the result (the CLI writes the reports) and this machine's calibration (the CLI reads it) are decided
elsewhere and handed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import itertools
import json
import secrets
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import __version__
from harness.client.backend import Endpoint, PooledBackend
from harness.client.backends import make_backend
from harness.clock import NS_PER_S, Clock, MonotonicClock
from harness.config.load import Phase
from harness.config.scenario import ClientConfig, Scenario
from harness.gctune import yield_cpu
from harness.records import RecordWriter, RequestRecord
from harness.redact import redactor
from harness.run.dispatch import Dispatcher
from harness.run.display import Display
from harness.run.exporter import LiveMetrics
from harness.run.progress import Progress
from harness.run.relay import Relay
from harness.run.rescue import rescue, save_parquet
from harness.run.scrape import ServerScraper
from harness.run.selfcheck import SelfCheck
from harness.run.server_tokens import server_words
from harness.run.signals import Stopper
from harness.run.sink import RecordSink
from harness.run.timeline import PhaseGate, manual_gate
from harness.stats.schema import Summary
from harness.stats.server import Row, metrics_url, same_origin, series_names
from harness.stats.summary import PhaseRun, build_summary
from harness.workload.plan import (
    BatchPlan,
    ClosedLoopPlan,
    PhasePlan,
    SessionPlan,
    peak_connections,
    plan_phase,
    plan_trace,
    text_maker,
    warm_connections,
)
from harness.workload.shards import LATE_MS, PHASE_SLACK_S, SKEW_MS, Shard, shard_plan

FLUSH_S = 0.05
SHARD_HEADER = "shard.json"


@dataclass(frozen=True, slots=True)
class Sharding:
    """This process runs one shard of a run split across processes or hosts, all starting at `start_at`."""

    shard: Shard
    start_at: float  # Unix time, seconds
    relay: Relay | None = None  # the line to a parent that started this shard (`--workers`, `--ray`)
    slack_s: float = PHASE_SLACK_S  # by hand (no relay): planned after each phase's schedule (run.timeline)

    def info(self) -> dict[str, Any]:
        planned = {} if self.relay is not None else {"phase_slack_s": self.slack_s}
        return {"index": self.shard.index, "count": self.shard.count, "start_at": self.start_at, **planned}

    def gate(self, phases: list[Phase], whole: list[PhasePlan], warn: Callable[[str], None]) -> PhaseGate:
        """When each phase begins: the parent's barrier, or (by hand) the planned timetable."""
        if self.relay is not None:
            return PhaseGate(relay=self.relay)
        if self.shard.count == 1:
            return PhaseGate()
        return manual_gate(phases, whole, self.start_at, self.slack_s, warn)

    async def wait(self, run_dir: Path, header: dict[str, Any], warn: Callable[[str], None]) -> None:
        """Until the common start (hosts are assumed NTP-synchronised); at once if it has passed, saying by how
        much (`shard.late_ms` in the summary; `harness merge` names it). The run's header goes to `shard.json`
        first: a shard killed before its summary can still be merged."""
        (run_dir / SHARD_HEADER).write_text(json.dumps({"run": header}), encoding="utf-8")
        if self.relay is not None:
            self.relay.start_beats()
            await self._clock(header, warn)
        delay = self.start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        late_ms = max(0.0, (time.time() - self.start_at) * 1000)
        header["shard"] = {**header["shard"], "late_ms": round(late_ms, 1)}
        if late_ms > LATE_MS:
            warn(f"shard {self.shard} started {late_ms:,.0f} ms after the common start (--start-at): its share "
                 "of the load is late by as much")


    async def _clock(self, header: dict[str, Any], warn: Callable[[str], None]) -> None:
        """This host's clock against the coordinator's (the parent of --workers/--ray), into the header."""
        assert self.relay is not None
        measured = await self.relay.clock_offset()
        if measured is None:
            return
        offset, uncertainty = measured
        header["shard"] = {**header["shard"], "clock_offset_ms": round(offset, 3),
                           "clock_uncertainty_ms": round(uncertainty, 3)}
        if abs(offset) - uncertainty > SKEW_MS:
            warn(f"shard {self.shard}: this host's clock is {offset:+,.1f} ms (±{uncertainty:.1f}) off the "
                 "coordinator's: the merge moves its records onto the coordinator's clock; latencies are unaffected")


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    summary: Summary
    records: list[RequestRecord]
    server_rows: list[Row]
    every: int = 1  # `records` holds 1 record in `every`: the run ended more than client.records_in_memory


def new_run_dir(reports_dir: Path, scenario_name: str) -> Path:
    """A new, empty run directory, created here: `mkdir` is atomic, so runs started in the same second by several
    processes each get their own (a check for existence and a later create let two runs share one)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    reports_dir.mkdir(parents=True, exist_ok=True)
    for suffix in range(1, 10_000):
        path = reports_dir / (f"{stamp}-{scenario_name}" + (f"-{suffix}" if suffix > 1 else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{reports_dir}: 10,000 runs of {scenario_name} in one second")


@contextlib.contextmanager
def claimed(run_dir: Path) -> Iterator[Path]:
    """A new run directory that is removed again if what fills it fails before writing anything (bad input found
    late: no empty folder is left behind looking like a run)."""
    try:
        yield run_dir
    except BaseException:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only an empty one
        raise


async def run_plan(dispatcher: Dispatcher, plan: PhasePlan, grace_s: float) -> list[RequestRecord]:
    """One phase's plan through the dispatcher's load model for it."""
    if isinstance(plan, BatchPlan):
        return await dispatcher.fixed_batch(plan.batches, grace_s)
    if isinstance(plan, ClosedLoopPlan):
        return await dispatcher.closed_loop(plan.build, plan.requests, plan.concurrency, plan.think_ns,
                                            plan.duration_ns, grace_s, plan.stagger_ns)
    if isinstance(plan, SessionPlan):
        return await dispatcher.sessions(plan.source, plan.offsets_ns.tolist(), grace_s, plan.conversations)
    return await dispatcher.open_loop(plan.specs, plan.offsets_ns.tolist(), plan.max_in_flight, grace_s)


def rerunnable(scenario: Scenario, endpoint: Endpoint, bundled: bool) -> Scenario:
    """The scenario as it ran, to be saved with the run: against a given endpoint, its URL and model, so a rerun
    of the saved file drives the same server (the key never: it stays in the environment)."""
    if bundled:
        return scenario
    cfg = scenario.endpoint.model_copy(update={"url": endpoint.base_url, "model": endpoint.model, "api": endpoint.api})
    return scenario.model_copy(update={"endpoint": cfg})


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
                     "bundled_simulator": bundled, "accelerator": scenario.endpoint.accelerator},
        "simulator": scenario.simulator.model_dump() if bundled else None,
    }


def _scraper(scenario: Scenario, endpoint: Endpoint, clock: Clock, run_dir: Path) -> ServerScraper | None:
    cfg = scenario.endpoint
    if cfg.scrape_interval_s == 0:
        return None
    url = cfg.metrics_url or metrics_url(endpoint.base_url)
    # The key goes only where the requests go: a metrics URL on another host never sees it.
    key = endpoint.api_key if same_origin(url, endpoint.base_url) else None
    return ServerScraper(url, clock, cfg.scrape_interval_s, run_dir, key, series_names(cfg.server_metrics))


async def _run_phases(scenario: Scenario, plans: list[PhasePlan], dispatcher: Dispatcher, backend: PooledBackend,
                      sink: RecordSink, check: SelfCheck, done: list[PhaseRun], gate: PhaseGate) -> None:
    """Phases in order until done or stopped; a phase cut short is kept with the records it has."""
    for k, (phase, plan) in enumerate(zip(scenario.phases, plans, strict=True)):
        if dispatcher.stopping:
            break
        await backend.warm(warm_connections(plan))
        await gate.before(k, phase.name)  # one timeline: no shard begins this phase before every shard ended the last
        sink.begin_phase(phase, plan, lambda: dispatcher.launched)
        if sink.relay is not None:
            dispatcher.between_batches = functools.partial(sink.relay.barrier, phase.name)
        mark = check.mark()
        try:
            await run_plan(dispatcher, plan, scenario.client.stop_grace_s)
        finally:
            sink.flush()
            if sink.phase.count:
                sink.phase.close()
                done.append(PhaseRun(phase, sink.phase.held, check.since(mark), plan_trace(plan),
                                     let_go=sink.phase.let_go))


@dataclass
class _Run:
    """One run's moving parts, opened in order and closed in reverse, whatever happens in between."""

    scenario: Scenario
    endpoint: Endpoint
    run_dir: Path
    clock: Clock
    display: Display
    plans: list[PhasePlan]
    metrics: LiveMetrics | None = None
    relay: Relay | None = None
    gate: PhaseGate = field(default_factory=PhaseGate)
    phases: list[PhaseRun] = field(default_factory=list)
    records: list[RequestRecord] = field(default_factory=list)
    every: int = 1  # past records_in_memory, `records` holds 1 in `every` (harness.stats.keep.RunSample)
    stopped: str | None = None
    stopped_ns: int | None = None
    records_file: dict[str, Any] = field(default_factory=dict)

    async def execute(self, backend: PooledBackend, check: SelfCheck) -> None:
        cfg = self.scenario.client
        # One thread builds requests ahead of their time: a real clock only (virtual time builds each when due).
        builder = (ThreadPoolExecutor(1, "harness-build", initializer=yield_cpu)
                   if isinstance(self.clock, MonotonicClock) else None)
        with RecordWriter(self.run_dir) as writer, builder or contextlib.nullcontext():
            sink = RecordSink(writer, redactor(self.endpoint.api_key), self.scenario.slo, cfg.records_in_memory,
                              metrics=self.metrics, relay=self.relay, warn=self.display.warn)
            dispatcher = Dispatcher(backend, self.clock, sink, builder, cfg.lookahead_requests,
                                    int(cfg.lookahead_s * NS_PER_S), keep_records=False)
            writer.on_failure = functools.partial(self._cannot_write, dispatcher)
            if self.relay is not None:
                self.relay.sent, self.relay.warn = (lambda: dispatcher.launched), self.display.warn
            sink.progress = Progress(self.clock, lambda: dispatcher.launched, len(self.plans))
            self.display.follow(sink.progress)
            stopper = Stopper(dispatcher, self.display.warn)
            stopper.install()
            try:
                await _run_phases(self.scenario, self.plans, dispatcher, backend, sink, check, self.phases, self.gate)
            except asyncio.CancelledError:
                if not stopper.cancelled:
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()  # our own second Ctrl-C: the run ends here, its records kept
            finally:
                sink.flush()
                stopper.remove()
                await self.display.stop()
                if self.metrics is not None:
                    self.metrics.end_phase()
                self.stopped = stopper.signal or ("records could not be written" if writer.failure else None)
                self.stopped_ns = stopper.at_ns
                self.records, self.every = sink.run.records, sink.run.every
            self.records_file = {"unwritten": len(writer.unwritten), "replaced": writer.replaced,
                                 "failure": writer.failure, "rescued_to": None}
            if writer.failure is not None:
                self._rescue(writer, sink)  # while the records file is still open: it may be all there is of it
        if sink.run.over:
            self.display.warn(f"the run ended {sink.run.count:,} requests, more than client.records_in_memory "
                              f"({sink.run.cap:,}): requests.parquet is not written and report.html draws 1 record in "
                              f"{sink.run.every} (requests.jsonl holds them all)")
        else:
            save_parquet(self.run_dir / "requests.parquet", sink.run.records)

    def _rescue(self, writer: RecordWriter, sink: RecordSink) -> None:
        """Every record into a fallback folder: from memory, or — past records_in_memory — back from the records
        file the run still holds open (readable even when its folder was deleted), then the ones never written."""
        records = itertools.chain(writer.read_back(), writer.unwritten) if sink.run.over else sink.run.records
        rescued = rescue(records, self.run_dir, self.scenario.to_yaml())
        self.records_file["rescued_to"] = None if rescued is None else str(rescued)
        n = sink.run.count
        self.display.warn(f"the run's {n} records were written to {rescued}" if rescued else
                          f"no folder took the run's {n} records: they are lost with this process")
        self.run_dir = rescued or self.run_dir

    def _cannot_write(self, dispatcher: Dispatcher, failure: str) -> None:
        self.display.warn(f"{failure}: stopping the run; every record is kept in memory and written elsewhere at "
                          "its end")
        dispatcher.stop()


    def ended(self, header: dict[str, Any]) -> None:
        """How the run ended, into its header."""
        header["stopped"] = self.stopped
        if self.gate.late_ms:
            header["shard"] = {**header["shard"], "phase_late_ms": self.gate.late_ms}
        if self.stopped_ns is not None:
            header["stopped_after_s"] = (self.stopped_ns - header["anchor"]["monotonic_ns"]) / 1e9
        header["not_run"] = [p.name for p in self.scenario.phases[len(self.phases):]]
        header["complete"] = len(self.phases) == len(self.plans) and self.stopped is None
        header["records_file"] = self.records_file or None


def _self_check(cfg: ClientConfig, clock: Clock, warn: Callable[[str], None],
                metrics: LiveMetrics | None) -> SelfCheck:
    """The harness watching itself; each late second also sets the live exporter's client-limited gauge."""
    return SelfCheck(clock, cfg.loop_lag_bound_ms, cfg.cpu_bound, warn,
                     late=None if metrics is None else metrics.client_late)


async def run_scenario(
    scenario: Scenario, endpoint: Endpoint, run_dir: Path, *, bundled: bool = False, clock: Clock | None = None,
    display: Display | None = None, ceiling_tokens_per_s: float | None = None, metrics: LiveMetrics | None = None,
    sharding: Sharding | None = None,
) -> RunResult:
    """Run every phase of `scenario` against `endpoint`; records go to `run_dir` as requests end.

    `metrics`, when given, is fed every finished record (the live Prometheus exporter).
    `ceiling_tokens_per_s` is this machine's client ceiling from `harness calibrate`, when known: each
    phase's summary then says how close it came to it. `sharding`: send only this shard's share of every
    phase, from the common start (`harness merge` joins the shards).
    """
    clock = clock or MonotonicClock()
    shard = sharding.shard if sharding else Shard(0, 1)
    run_id = shard.run_id(scenario.name, sharding.start_at) if sharding else secrets.token_hex(4)
    text = text_maker(scenario)  # a bad trace, dataset or tokenizer fails here, before any report exists
    counted = await server_words(endpoint) if scenario.workload.tokenizer == "server" else None
    whole = [plan_phase(scenario, i, run_id, counted or text, counted.overhead if counted else 0)
             for i in range(len(scenario.phases))]
    plans = [shard_plan(plan, shard) for plan in whole]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(rerunnable(scenario, endpoint, bundled).to_yaml(), encoding="utf-8")
    header = _header(scenario, endpoint, run_id, clock, bundled)
    header |= {"tokenizer": counted.info() if counted else None, "shard": sharding.info() if sharding else None}
    cfg = scenario.client
    run = _Run(scenario, endpoint, run_dir, clock, display or Display(), plans, metrics,
               sharding.relay if sharding else None)
    check = _self_check(cfg, clock, run.display.warn, metrics)
    if sharding is not None:
        run.gate = sharding.gate(list(scenario.phases), whole, run.display.warn)
    backend = make_backend(endpoint, cfg, max(peak_connections(p) for p in plans))
    scraper = _scraper(scenario, endpoint, clock, run_dir)
    scraped: dict[str, Any] | None = None
    if scraper is not None:
        scraper.start()
    check.start()
    try:
        if sharding is not None:
            await sharding.wait(run_dir, header, run.display.warn)
        await run.execute(backend, check)
    finally:
        await check.stop()
        await backend.close()
        if scraper is not None:
            scraped = await scraper.stop()
    rows = scraper.rows if scraper is not None else []
    run.ended(header)
    summary = build_summary(scenario, header, run.phases, rows, scraped, ceiling_tokens_per_s)
    return RunResult(run.run_dir, summary, run.records, rows, run.every)  # run_dir: a rescue folder, if need be
