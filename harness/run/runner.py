"""Runs a scenario against an endpoint: phases in order, records to disk as they come, a summary at the end.

The runner only runs. Which endpoint (run.target), which backend (client.backends), what to do with
the result (the CLI writes the reports) and this machine's calibration (the CLI reads it) are decided
elsewhere and handed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness.client.backend import Endpoint, PooledBackend
from harness.client.backends import make_backend
from harness.clock import NS_PER_S, Clock, MonotonicClock
from harness.config.scenario import ClientConfig, Scenario
from harness.devices.catalogue import save_used
from harness.gctune import yield_cpu
from harness.records import RecordWriter, RequestRecord
from harness.redact import redactor
from harness.run.dispatch import Dispatcher
from harness.run.display import Display
from harness.run.exporter import LiveMetrics
from harness.run.header import run_header
from harness.run.observe import PhaseStart, RecordObserver
from harness.run.pacers.by_plan import run_plan
from harness.run.progress import Progress
from harness.run.rescue import rescue, save_parquet
from harness.run.result import RunResult
from harness.run.scrape import ServerScraper
from harness.run.selfcheck import SelfCheck
from harness.run.server_tokens import Chosen, ServerWords, default_words, server_words
from harness.run.signals import Stopper
from harness.run.sink import RecordSink
from harness.run.start_gate import AtOnce, ParentLine, PhaseStarts, StartGate
from harness.stats.keep import RunSample
from harness.stats.schema import RecordsFile, RunHeader, ScrapeInfo, ServerTokenizer
from harness.stats.server import metrics_url, same_origin, series_names
from harness.stats.summary import PhaseRun, build_summary
from harness.voice import Voice
from harness.workload.plan import (
    PhasePlan,
    peak_connections,
    plan_phase,
    plan_trace,
    text_maker,
    warm_connections,
)
from harness.workload.shards import Shard, empty, idle_line, shard_plan


def rerunnable(scenario: Scenario, endpoint: Endpoint, bundled: bool) -> Scenario:
    """The scenario as it ran, to be saved with the run: against a given endpoint, its URL and model, so a
    rerun of the saved file drives the same server (the key never: it stays in the environment)."""
    if bundled:
        return scenario
    cfg = scenario.endpoint.changed(url=endpoint.base_url, model=endpoint.model, api=endpoint.api)
    return scenario.changed(endpoint=cfg)


def _scraper(scenario: Scenario, endpoint: Endpoint, clock: Clock, run_dir: Path) -> ServerScraper | None:
    cfg = scenario.endpoint
    if cfg.scrape_interval_s == 0:
        return None
    url = cfg.metrics_url or metrics_url(endpoint.base_url)
    # The key and the gateway's headers go only where the requests go: a metrics URL on another host never
    # sees them.
    near = same_origin(url, endpoint.base_url)
    return ServerScraper(url, clock, cfg.scrape_interval_s, run_dir, endpoint.request_headers if near else None,
                         series_names(cfg.server_metrics), endpoint.tls() if near else None)


async def _run_phases(scenario: Scenario, plans: list[PhasePlan], dispatcher: Dispatcher, backend: PooledBackend,
                      sink: RecordSink, check: SelfCheck, done: list[PhaseRun], gate: PhaseStarts,
                      relay: ParentLine | None, reached: list[str]) -> None:
    """Phases in order until done or stopped; a phase cut short is kept with the records it has. `reached`:
    every phase begun, a shard's empty share of one included (`done` holds those that sent something)."""
    for k, (phase, plan) in enumerate(zip(scenario.phases, plans, strict=True)):
        if dispatcher.stopping:
            break
        reached.append(phase.name)
        await backend.warm(warm_connections(plan))
        await gate.before(k, phase.name)  # one timeline: no shard begins this phase before every shard ended the last
        sink.begin_phase(PhaseStart(phase, plan, lambda: dispatcher.launched))
        mark = check.mark()
        try:
            await run_plan(dispatcher, plan, scenario.client.stop_grace_s,
                           None if relay is None else functools.partial(relay.barrier, phase.name))
        finally:
            sink.end_phase()
            if sink.phase.count:
                done.append(PhaseRun(phase, sink.phase.held, check.since(mark), plan_trace(plan),
                                     let_go=sink.phase.let_go))


@dataclass
class _Left:
    """What a run leaves, filled in as it goes: its phases and records, where they are, how it ended."""

    folder: Path  # the run's own, or the rescue folder that took its records
    phases: list[PhaseRun] = field(default_factory=list)
    reached: list[str] = field(default_factory=list)  # phases begun, with or without records
    records: list[RequestRecord] = field(default_factory=list)
    every: int = 1  # past records_in_memory, `records` holds 1 in `every` (harness.stats.keep.RunSample)
    stopped: str | None = None
    stopped_ns: int | None = None
    records_file: RecordsFile | None = None


@dataclass
class _Run:
    """One run's moving parts, given whole, opened in order and closed in reverse, whatever happens in between;
    what it leaves goes in `left`."""

    scenario: Scenario
    endpoint: Endpoint
    run_dir: Path
    clock: Clock
    display: Display
    plans: list[PhasePlan]
    metrics: LiveMetrics | None
    relay: ParentLine | None
    gate: PhaseStarts
    left: _Left = field(init=False)

    def __post_init__(self) -> None:
        self.left = _Left(self.run_dir)

    async def execute(self, backend: PooledBackend, check: SelfCheck) -> None:
        cfg = self.scenario.client
        # One thread builds requests ahead of their time: a real clock only (virtual time builds each when
        # due).
        builder = (ThreadPoolExecutor(1, "harness-build", initializer=yield_cpu)
                   if isinstance(self.clock, MonotonicClock) else None)
        dispatcher: Dispatcher | None = None  # made once the records have somewhere to go

        def cannot_write(failure: str) -> None:
            self.display.warn(f"{failure}: stopping the run; the records are kept and, at its end, written to a "
                              "fallback folder if one takes them (said then, and in summary.json's rescued_to)")
            if dispatcher is not None:
                dispatcher.stop()

        with RecordWriter(self.run_dir, cannot_write) as writer, builder or contextlib.nullcontext():
            sink = RecordSink(writer, redactor(*self.endpoint.secrets), self.scenario.slo, cfg.records_in_memory,
                              self._watchers(), self.display)
            dispatcher = Dispatcher(backend, self.clock, sink, builder, cfg.lookahead_requests,
                                    int(cfg.lookahead_s * NS_PER_S), keep_records=False,
                                    told=None if self.relay is None else self.relay.launched)
            stopper = Stopper(dispatcher, self.display)
            stopper.install()
            try:
                await _run_phases(self.scenario, self.plans, dispatcher, backend, sink, check, self.left.phases,
                                  self.gate, self.relay, self.left.reached)
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
                self.left.stopped = stopper.signal or ("records could not be written" if writer.failure else None)
                self.left.stopped_ns = stopper.at_ns
                self.left.records, self.left.every = sink.run.records, sink.run.every
            self.left.records_file = RecordsFile(unwritten=len(writer.unwritten), replaced=writer.replaced,
                                            failure=writer.failure, rescued_to=None)
            if writer.failure is not None:
                self._rescue(writer, sink)  # while the records file is still open: it may be all there is of it
        self._table(sink.run)

    def _watchers(self) -> list[tuple[str, RecordObserver]]:
        """Who follows the records besides the run itself: the progress line (shown), the exporter, the
        relay."""
        progress = Progress(self.clock, len(self.plans))
        self.display.follow(progress)
        return [(name, w) for name, w in (("the progress line", progress), ("the live exporter", self.metrics),
                                          ("the relay to the parent", self.relay)) if w is not None]

    def _table(self, run: RunSample) -> None:
        """requests.parquet, from the records in memory; past records_in_memory there is only a sample:
        said."""
        if run.over:
            self.display.warn(f"the run ended {run.count:,} requests, more than client.records_in_memory "
                              f"({run.cap:,}): requests.parquet is not written and report.html draws 1 record in "
                              f"{run.every} (requests.jsonl holds them all)")
        else:
            save_parquet(self.run_dir / "requests.parquet", run.records)

    def _rescue(self, writer: RecordWriter, sink: RecordSink) -> None:
        """Every record into a fallback folder: from memory, or — past records_in_memory — back from the
        records file the run still holds open (readable even when its folder was deleted), then the ones never
        written."""
        records = itertools.chain(writer.read_back(), writer.unwritten) if sink.run.over else sink.run.records
        rescued = rescue(records, self.run_dir, self.scenario.to_yaml())
        if self.left.records_file is not None:
            self.left.records_file = self.left.records_file.changed(rescued_to=rescued and str(rescued))
        n = sink.run.count
        self.display.warn(f"the run's {n} records were written to {rescued}" if rescued else
                          f"no folder took the run's {n} records: they are lost with this process")
        self.left.folder = rescued or self.left.folder

    def ended(self, header: RunHeader) -> RunHeader:
        """The header with how the run ended."""
        shard = header.shard
        if self.gate.late_ms and shard is not None:
            shard = shard.changed(phase_late_ms=self.gate.late_ms)
        after = None
        left = self.left
        if left.stopped_ns is not None and header.anchor is not None:
            after = (left.stopped_ns - header.anchor.monotonic_ns) / 1e9
        return header.changed(
            stopped=left.stopped, shard=shard, stopped_after_s=after, records_file=left.records_file,
            not_run=self.not_run(), complete=not self.not_run() and left.stopped is None)

    def not_run(self) -> list[str]:
        """Phases that sent nothing though their plan had something to send (a shard's empty share of a phase
        it reached ran in full: it had nothing to send)."""
        ran = {r.phase.name for r in self.left.phases} | {
            p.name for p, plan in zip(self.scenario.phases, self.plans, strict=True) if p.name in self.left.reached
            and empty(plan)}
        return [p.name for p in self.scenario.phases if p.name not in ran]


def _lined_up(sharding: StartGate, scenario: Scenario, whole: list[PhasePlan], display: Display) -> PhaseStarts:
    """When this shard begins each phase; by hand, each shard also says which shards have no share of a phase
    (3 users over 4 shards) — the parent of workers says it itself."""
    if sharding.relay is None:
        for phase, plan in zip(scenario.phases, whole, strict=True):
            if (line := idle_line(phase.name, plan, sharding.shard.count)) is not None:
                display.say(line)
    return sharding.gate(list(scenario.phases), whole, display)


def _self_check(cfg: ClientConfig, clock: Clock, voice: Voice,
                metrics: LiveMetrics | None) -> SelfCheck:
    """The harness watching itself; each late second also sets the live exporter's client-limited gauge."""
    return SelfCheck(clock, cfg.loop_lag_bound_ms, cfg.cpu_bound, voice,
                     late=None if metrics is None else metrics.client_late, max_shift=cfg.max_shift)


async def _server_counts(scenario: Scenario, endpoint: Endpoint, display: Display
                         ) -> tuple[ServerWords | None, Chosen]:
    """The endpoint's one-token words: asked for (`--tokenizer server`), or by default where its /tokenize
    counts the harness's words otherwise than one each; the default's choice is said under the plan."""
    tokenizer = scenario.workload.tokenizer
    if tokenizer == "server":
        return await server_words(endpoint), "flag"
    if tokenizer is not None:
        return None, "flag"
    found = await default_words(endpoint)
    display.say(f"  {found.said}")
    if found.warning:
        display.warn(found.warning)
    return found.words, "default"


async def _planned(scenario: Scenario, endpoint: Endpoint, run_id: str, display: Display
                   ) -> tuple[list[PhasePlan], ServerTokenizer | None]:
    """Every phase's plan, its prompts counted by the endpoint where it can; what the endpoint's /tokenize
    said."""
    text = text_maker(scenario)  # a bad trace, dataset or tokenizer fails here, before any report exists
    counted, chosen = await _server_counts(scenario, endpoint, display)
    whole = [plan_phase(scenario, i, run_id, counted or text, counted.overhead if counted else 0)
             for i in range(len(scenario.phases))]
    return whole, counted.info(chosen) if counted else None


async def run_scenario(
    scenario: Scenario, endpoint: Endpoint, run_dir: Path, *, bundled: bool = False, clock: Clock | None = None,
    display: Display | None = None, ceiling_tokens_per_s: float | None = None, metrics: LiveMetrics | None = None,
    sharding: StartGate | None = None,
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
    display = display or Display()
    whole, said = await _planned(scenario, endpoint, run_id, display)
    plans = [shard_plan(plan, shard) for plan in whole]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(rerunnable(scenario, endpoint, bundled).to_yaml(), encoding="utf-8")
    save_used(run_dir)  # every command reads the run back with the presets it used
    header = run_header(scenario, run_id, clock=clock, endpoint=endpoint, bundled=bundled,
                        tokenizer=said, shard=sharding.info() if sharding else None)
    gate = _lined_up(sharding, scenario, whole, display) if sharding is not None else AtOnce()
    run = _Run(scenario, endpoint, run_dir, clock, display, plans, metrics, sharding.relay if sharding else None,
               gate)
    scraper = _scraper(scenario, endpoint, clock, run_dir)
    header, scraped = await _measured(run, header, sharding, scraper)
    rows = scraper.rows if scraper is not None else []
    summary = build_summary(scenario, run.ended(header), run.left.phases, rows, scraped, ceiling_tokens_per_s)
    return RunResult(run.left.folder, summary, run.left.records, rows, run.left.every)


async def _measured(run: _Run, header: RunHeader, sharding: StartGate | None, scraper: ServerScraper | None
                    ) -> tuple[RunHeader, ScrapeInfo | None]:
    """The run executed with its self-check, its connections and its scraper open around it, closed whatever
    happens; the header as the start gate left it, and what the scrape saw."""
    cfg = run.scenario.client
    check = _self_check(cfg, run.clock, run.display, run.metrics)
    backend = make_backend(run.endpoint, cfg, max(peak_connections(p) for p in run.plans))
    scraped: ScrapeInfo | None = None
    if scraper is not None:
        scraper.start()
    check.start()
    try:
        if sharding is not None:
            header = await sharding.wait(run.run_dir, header, run.display)
        await run.execute(backend, check)
    finally:
        await check.stop()
        await backend.close()
        if scraper is not None:
            scraped = await scraper.stop()
    return header, scraped
