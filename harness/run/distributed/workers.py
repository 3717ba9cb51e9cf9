"""`harness run --workers N`: N shard processes on one start, their records streamed to this one, merged.

Each worker is a `harness run --shard i/N --start-at T --relay` of the scenario against the endpoint this
process resolved (the bundled simulator is started once, here): with `--workers` a local process pinned to its
own core where there are enough, with `--ray` one on a Ray actor (`harness/run/distributed/ray_actors.py`).
Either is a `Link`: the worker's output lines, a way to answer it, its exit. Records stream back as they end
(`harness/run/distributed/hub.py` keeps them, feeds the live view and exporter, and holds the fixed-batch
barrier); when all have ended the shards are merged into the run directory (`harness merge`'s code). A worker
that dies is named with its exit, the records it streamed kept and the requests it never sent counted; the
merged run is then incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Protocol

from harness.client.backend import Endpoint
from harness.clock import MonotonicClock
from harness.config.scenario import Scenario
from harness.devices.catalogue import catalogue
from harness.errors import EXIT_HANGUP, EXIT_NOTHING_OK, EXIT_REGRESSION, EXIT_STOPPED
from harness.limits import WORKER_LINE_BYTES, WORKER_OUT_BYTES
from harness.records import RecordWriter, RequestRecord
from harness.run.display import Display
from harness.run.distributed.hub import Hub
from harness.run.distributed.merge import ParentSaw, ShardRun, killed_summary, merge_runs
from harness.run.distributed.relay import BEAT_S
from harness.run.result import RunResult
from harness.run.selfcheck import SelfCheck
from harness.run.simulator import given_cores
from harness.stats.schema import Anchor, ShardLoss, read_summary
from harness.stats.verdict import health
from harness.voice import Reworded
from harness.workload.plan import PhasePlan
from harness.workload.shards import Shard, shares

STARTUP_S = 3.0  # for the workers to start, build their first requests and open connections
KEY_VARIABLE = "HARNESS_WORKER_API_KEY"  # the key reaches the workers through their environment only
HEADER_VARIABLE = "HARNESS_WORKER_HEADER_"  # as do the headers' values, one variable each
SAY_EVERY_S = 10.0
SILENT_S = 2.0  # a worker that says nothing this long (it beats twice a second) is named: frozen, stuck
# Exits of a worker whose run ended and wrote its summary: stopped by a signal, no request ok, a threshold
# broken.
WHOLE_EXITS = (0, EXIT_NOTHING_OK, EXIT_REGRESSION, EXIT_STOPPED, EXIT_HANGUP)


class Link(Protocol):
    """One worker, wherever it runs."""

    index: int
    reports: Path  # on this host: where the shard's run directory is (or is copied to when it ends)
    log: str  # where its stderr is kept (a path here, or host:path on a Ray node)
    where: str  # where the worker itself writes its records (the same path here, or host:path on a Ray node)

    @property
    def returncode(self) -> int | None: ...

    def lines(self) -> AsyncIterator[bytes]: ...

    def send(self, line: bytes) -> None: ...

    async def finish(self) -> None:
        """After its lines end: until it has exited, its run directory here."""

    def stop(self) -> None:
        """Ask it to stop (SIGTERM: the first stops sending, a second cancels its requests in flight)."""

    def abandon(self, why: str) -> None:
        """Stop it at once, whatever its state (a frozen process acts on no SIGTERM); `death` then says
        why."""

    def death(self) -> str:
        """How it ended, when it did not end well."""


def shard_dir(reports: Path) -> Path | None:
    found = [d for d in reports.iterdir() if d.is_dir()] if reports.is_dir() else []
    return found[0] if found else None


def worker_args(endpoint: Endpoint, shard: Shard, start_at: float) -> list[str]:
    """`harness run SCENARIO` takes these, and `--reports-dir`, to be one worker."""
    args = ["--endpoint", endpoint.base_url, "--model", endpoint.model, "--api", endpoint.api, "--shard", str(shard),
            "--start-at", repr(start_at), "--late-ok", "--progress", "off", "--no-pin", "--relay"]
    args += ["--api-key-env", KEY_VARIABLE] if endpoint.api_key else []
    for k, (name, _) in enumerate(endpoint.headers):
        args += ["--header", f"{name}: env:{HEADER_VARIABLE}{k}"]
    return args


def key_env(endpoint: Endpoint) -> dict[str, str]:
    """The API key and the headers' values, for a worker's environment only (never its command line, which
    `ps` shows)."""
    values = {f"{HEADER_VARIABLE}{k}": value for k, (_, value) in enumerate(endpoint.headers)}
    return {KEY_VARIABLE: endpoint.api_key, **values} if endpoint.api_key else values


def worker_scenario(scenario: Scenario) -> Scenario:
    """What a worker runs: the scenario, less what only the parent does (serve the live metrics, push)."""
    return scenario.changed(metrics_port=0, metrics_hold_s=0.0, pushgateway=None)


def common_start(n: int) -> float:
    return round(time.time() + STARTUP_S + 0.25 * n, 3)


def child_setup(cores: set[int]) -> Callable[[], None]:
    """Run in the worker before it starts: its core, death with its parent (an orphan would keep sending), and
    a process group of its own (a terminal's Ctrl-C reaches the parent alone, which passes each signal on
    once)."""
    def setup() -> None:
        os.setpgid(0, 0)
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    return setup


class LocalWorker:
    def __init__(self, index: int, reports: Path, proc: asyncio.subprocess.Process) -> None:
        self.index, self.reports, self.proc = index, reports, proc
        self.log = str(reports.parent / f"{index}.log")
        self.where = str(reports)
        self.abandoned: str | None = None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def lines(self) -> AsyncIterator[bytes]:
        assert self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except ValueError:  # past WORKER_LINE_BYTES: the reader has let its bytes go; it reads on after them
                yield f"[harness: a line over {WORKER_LINE_BYTES >> 20} MiB dropped]\n".encode()
                continue
            if not line:
                return
            yield line

    def send(self, line: bytes) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(line)

    async def finish(self) -> None:
        await self.proc.communicate()  # what it still writes is read, so a stopping worker never blocks on it

    def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()

    def abandon(self, why: str) -> None:
        if self.proc.returncode is None:
            self.abandoned = why
            self.proc.kill()

    def death(self) -> str:
        return f"{self.abandoned}: killed" if self.abandoned else f"exit {self.proc.returncode}"


async def start_workers(scenario: Scenario, endpoint: Endpoint, work: Path, n: int,
                        spare_last_core: bool = False) -> list[Link]:
    """`spare_last_core`: the bundled simulator has it."""
    work.mkdir(parents=True, exist_ok=True)
    scenario_file = work / "scenario.yaml"
    scenario_file.write_text(worker_scenario(scenario).to_yaml(), encoding="utf-8")
    start_at = common_start(n)
    cores = given_cores()
    cores = cores[:-1] if spare_last_core and len(cores) > 1 else cores
    workers: list[LocalWorker] = []
    for i in range(n):
        core = {cores[i]} if len(cores) >= n else set(cores)  # one core each, or the OS shares them out
        with (work / f"{i}.log").open("wb") as log:  # the worker keeps its own copy of the file
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "harness", "run", str(scenario_file),
                *worker_args(endpoint, Shard(i, n), start_at), "--reports-dir", str(work / str(i)),
                *(arg for path in catalogue().files_here() for arg in ("--presets", str(path))),
                env={**os.environ, **key_env(endpoint)}, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=log, preexec_fn=child_setup(core), limit=WORKER_LINE_BYTES)
        workers.append(LocalWorker(i, work / str(i), proc))
    (work / "pids").write_text("".join(f"{w.index} {w.proc.pid}\n" for w in workers), encoding="utf-8")
    return list(workers)




class CappedLog:
    """A worker's stray output, kept up to WORKER_OUT_BYTES bytes; what is cut is counted and said at its
    end."""

    def __init__(self, path: Path, cap: int = WORKER_OUT_BYTES) -> None:
        self.path, self.cap, self.kept, self.cut = path, cap, 0, 0
        self._file = path.open("ab")

    def __enter__(self) -> CappedLog:
        return self

    def write(self, line: bytes) -> None:
        room = self.cap - self.kept
        if room <= 0:
            self.cut += len(line)
            return
        self._file.write(line[:room])
        self.kept += min(len(line), room)
        self.cut += max(0, len(line) - room)

    def __exit__(self, *_: object) -> None:
        if self.cut:
            self._file.write(f"\n[harness: output cut at {self.cap:,} bytes; {self.cut:,} more not kept]\n"
                             .encode())
        self._file.close()


async def follow(links: Sequence[Link], hub: Hub, display: Display, logs: Path) -> None:
    """Until every worker has ended: its relay lines to the hub, any other output to its log, and every few
    seconds a line of how many records each has sent back."""
    async def pump(link: Link) -> None:
        with CappedLog(logs / f"{link.index}.out") as out:
            async for line in link.lines():
                if not hub.feed(link.index, line):
                    out.write(line)
        await link.finish()
        hub.ended(link.index)
        _keep_streamed(link, hub.records[link.index])

    helpers = [asyncio.ensure_future(_say_counts(hub, display)), asyncio.ensure_future(_watch(links, hub, display))]
    # The parent watches itself too: a late coordinator delays barriers and the live view (not the latencies).
    check = SelfCheck(MonotonicClock(), voice=Reworded(display, _as_parent))
    check.start()
    mark = check.mark()
    try:
        await asyncio.gather(*(pump(link) for link in links))
    finally:
        for helper in helpers:
            helper.cancel()
        await check.stop()
        hub.coordinator = health(check.since(mark))


def _as_parent(warning: str) -> str:
    """The parent's own lateness, said as what it delays: barriers and the live view, not the latencies."""
    return f"the parent of the workers: {warning.split(';')[0]}: its barriers and live view may lag"


async def _say_counts(hub: Hub, display: Display) -> None:
    """Every few seconds, how many records each worker has sent back."""
    while True:
        await asyncio.sleep(SAY_EVERY_S)
        counts = [len(r) for r in hub.records]
        display.say(f"workers: {sum(counts)} requests done ({' + '.join(map(str, counts))})")


async def _watch(links: Sequence[Link], hub: Hub, display: Display) -> None:
    """Workers gone silent named (and named again when they speak); one silent past client.worker_silence_s
    killed, its streamed records kept, the rest of its shard counted lost."""
    named: set[int] = set()
    limit = hub.scenario.client.worker_silence_s
    while True:
        await asyncio.sleep(BEAT_S)
        quiet = hub.silent(time.monotonic(), SILENT_S)
        for w in sorted(set(quiet) - named):
            display.warn(f"worker {w} has said nothing for {quiet[w]:.0f} s (frozen, e.g. SIGSTOP, or stuck): "
                         f"the live view and any barrier wait for it, {limit:g} s at most "
                         f"(client.worker_silence_s); log: {links[w].log}")
        for w in sorted(named - set(quiet)):
            display.warn(f"worker {w} speaks again after {hub.silent_max.get(w, 0):.0f} s of silence")
        for w in sorted(w for w, seconds in quiet.items() if seconds >= limit):
            display.warn(f"worker {w} said nothing for {limit:g} s: killed; the records it sent are kept and "
                         "the rest of its shard counted lost")
            links[w].abandon(f"silent for {quiet[w]:.0f} s")
            hub.ended(w)  # no barrier or phase waits for it any longer
        named = set(quiet)


def _keep_streamed(link: Link, records: list[RequestRecord]) -> None:
    """A worker whose records are not on this host's disk (a Ray actor's): the ones it streamed back, written
    into its shard directory here, so that it is a shard `harness merge` can read."""
    where = shard_dir(link.reports) or link.reports
    if records and not (where / "requests.jsonl").is_file():
        with RecordWriter(where) as writer:
            for rec in records:
                writer.write(rec)


def planned(plans: Sequence[PhasePlan], shard: Shard) -> int | None:
    """Requests a shard was to send (None: a phase bound by time, or sessions, has no count up front)."""
    counts = shares(list(plans), shard)
    return None if None in counts else sum(c or 0 for c in counts)


def _finished(link: Link, hub: Hub, text: str) -> ShardRun | None:
    run_dir = shard_dir(link.reports)
    if link.returncode not in WHOLE_EXITS or run_dir is None or not (run_dir / "summary.json").is_file():
        return None
    return ShardRun(run_dir, text, read_summary(run_dir / "summary.json"), hub.records[link.index],
                    silent_max_s=_silence(hub, link.index), records_at=link.where,
                    silences=hub.silences.get(link.index))


def _silence(hub: Hub, index: int) -> float | None:
    seconds = hub.silent_max.get(index)
    return None if seconds is None else round(seconds, 1)


def _dead(link: Link, like: ShardRun, hub: Hub, text: str, share: int | None) -> ShardRun:
    """A worker that died: the records it streamed back, on its own clock's anchor (as it said when it began),
    and what it lost: the requests it had sent that never ended, and its share it never sent."""
    said = hub.anchors.get(link.index)
    anchor = like.saved.run.anchor if said is None else Anchor.model_validate(said)
    sent, ended = hub.sent_by(link.index), len(hub.records[link.index])
    loss = ShardLoss(phase=hub.phase_of[link.index], sent=sent, ended=ended, in_flight=max(sent - ended, 0),
                     never_sent=None if share is None else max(share - sent, 0))
    header = like.saved.run.changed(shard=like.shard.changed(index=link.index), anchor=anchor)
    return ShardRun(shard_dir(link.reports) or link.reports, text,
                    killed_summary(header, f"worker died ({link.death()})"), hub.records[link.index], loss=loss,
                    silent_max_s=_silence(hub, link.index), records_at=link.where,
                    silences=hub.silences.get(link.index))


def merge_workers(scenario: Scenario, plans: Sequence[PhasePlan], links: Sequence[Link], hub: Hub, run_dir: Path,
                  bundled: bool, stopped: str | None = None) -> tuple[RunResult, list[str]]:
    """The workers' shards as one run in `run_dir`, and a line for each worker that died. `stopped`: the
    signal that stopped the parent, if one did."""
    text = scenario.to_yaml()
    done = {link.index: s for link in links if (s := _finished(link, hub, text)) is not None}
    if not done:
        raise RuntimeError("every worker died: " + "; ".join(f"{w.index}: exit {w.returncode}" for w in links))
    alive = list(done.values())
    died, lines = [], []
    for link in links:
        if link.index not in done:
            shard = _dead(link, alive[0], hub, text, planned(plans, Shard(link.index, len(links))))
            died.append(shard)
            loss = shard.loss
            assert loss is not None
            never = "" if loss.never_sent is None else f", {loss.never_sent} never sent"
            lines.append(f"worker {link.index} died ({link.death()}) in phase {loss.phase}: its {loss.ended} "
                         f"finished records kept, {loss.in_flight} in flight lost{never}; log: {link.log}")
    # A death is said per shard (`run.shards[].stopped`); the run's own `stopped` stays a signal's.
    endpoint = alive[0].saved.run.endpoint
    parent = ParentSaw(None if endpoint is None else endpoint.changed(bundled_simulator=bundled),
                       hub.coordinator, stopped or next((s.saved.run.stopped for s in alive if s.saved.run.stopped),
                                                        None))
    return merge_runs([*alive, *died], run_dir, parent), lines
