"""`harness run --workers N`: N local harness processes, one shard each, on one start, merged into one run.

Each worker is a `harness run --shard i/N --start-at T` of the scenario against the endpoint this process
resolved (the bundled simulator is started once, here), pinned to its own core where there are enough, with
its own event loop and connection pool; its records reach its shard directory under `workers/` as they end,
and the parent counts them as they come. When all have ended the shards are merged into the run directory
(`harness merge`). A worker that dies is named with its exit, its finished records kept and the requests it
never sent counted; the merged run is then incomplete.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.client.backend import Endpoint
from harness.config.scenario import Scenario
from harness.records import read_records
from harness.report.merge import ShardRun, merge_runs, read_shard
from harness.run.display import Display
from harness.run.runner import RunResult
from harness.run.simulator import given_cores
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan, plan_phase
from harness.workload.shards import Shard, shard_plan

STARTUP_S = 3.0  # for the workers to start, build their first requests and open connections
KEY_VARIABLE = "HARNESS_WORKER_API_KEY"  # the key reaches the workers through their environment only
SAY_EVERY_S = 10.0


@dataclass
class Worker:
    index: int
    reports: Path
    proc: subprocess.Popen[bytes]

    @property
    def run_dir(self) -> Path | None:
        found = [d for d in self.reports.iterdir() if d.is_dir()] if self.reports.is_dir() else []
        return found[0] if found else None

    def records(self) -> int:
        run_dir = self.run_dir
        path = run_dir / "requests.jsonl" if run_dir else None
        if path is None or not path.is_file():
            return 0
        with path.open("rb") as f:
            return sum(1 for _ in f)


def _command(scenario_file: Path, endpoint: Endpoint, shard: Shard, start_at: float, reports: Path) -> list[str]:
    cmd = [sys.executable, "-m", "harness", "run", str(scenario_file), "--endpoint", endpoint.base_url, "--model",
           endpoint.model, "--api", endpoint.api, "--shard", str(shard), "--start-at", repr(start_at),
           "--reports-dir", str(reports), "--progress", "off", "--no-pin"]
    return cmd + (["--api-key-env", KEY_VARIABLE] if endpoint.api_key else [])


def _pin(cores: set[int]) -> Any:
    if not cores or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cores)


def start_workers(scenario: Scenario, endpoint: Endpoint, work: Path, n: int,
                  spare_last_core: bool = False) -> tuple[list[Worker], float]:
    """`spare_last_core`: the bundled simulator has it."""
    work.mkdir(parents=True, exist_ok=True)
    scenario_file = work / "scenario.yaml"
    scenario_file.write_text(scenario.to_yaml(), encoding="utf-8")
    start_at = round(time.time() + STARTUP_S + 0.25 * n, 3)
    env = {**os.environ, **({KEY_VARIABLE: endpoint.api_key} if endpoint.api_key else {})}
    cores = given_cores()
    cores = cores[:-1] if spare_last_core and len(cores) > 1 else cores
    workers = []
    for i in range(n):
        core = {cores[i]} if len(cores) >= n else set(cores)  # one core each, or the OS shares them out
        reports = work / str(i)
        with (work / f"{i}.log").open("wb") as log:  # the worker keeps its own copy of the file
            proc = subprocess.Popen(_command(scenario_file, endpoint, Shard(i, n), start_at, reports), env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=_pin(core))
        workers.append(Worker(i, reports, proc))
    (work / "pids").write_text("".join(f"{w.index} {w.proc.pid}\n" for w in workers), encoding="utf-8")
    return workers, start_at


async def watch(workers: list[Worker], display: Display) -> None:
    """Until every worker has ended, saying every few seconds how many records they have written."""
    said = time.monotonic()
    while any(w.proc.poll() is None for w in workers):
        await asyncio.sleep(0.25)
        if time.monotonic() - said >= SAY_EVERY_S:
            said = time.monotonic()
            counts = [w.records() for w in workers]
            display.say(f"workers: {sum(counts)} requests done ({' + '.join(map(str, counts))})")


def planned(scenario: Scenario, shard: Shard) -> int | None:
    """Requests a shard was to send (None: a phase bound by time, or sessions, has no count up front)."""
    total = 0
    for i in range(len(scenario.phases)):
        plan: PhasePlan = shard_plan(plan_phase(scenario, i, "count"), shard)
        if isinstance(plan, OpenLoopPlan | BatchPlan):
            total += len(plan.specs)
        elif isinstance(plan, ClosedLoopPlan) and plan.requests is not None:
            total += plan.requests
        else:
            return None
    return total


def _dead(worker: Worker, like: ShardRun, scenario_text: str) -> ShardRun:
    """A worker that died: the records it wrote, on the parent host's clock (the live shards' anchor)."""
    run_dir = worker.run_dir
    path = run_dir / "requests.jsonl" if run_dir else None
    records = list(read_records(path)) if path is not None and path.is_file() else []
    run = {**like.saved["run"], "shard": {**like.shard, "index": worker.index}, "complete": False,
           "stopped": f"worker died (exit {worker.proc.returncode})"}
    return ShardRun(run_dir or worker.reports, scenario_text, {"run": run, "phases": []}, records)


def merge_workers(scenario: Scenario, workers: list[Worker], run_dir: Path,
                  bundled: bool) -> tuple[RunResult, list[str]]:
    """The workers' shards as one run in `run_dir`, and a line for each worker that died."""
    text = scenario.to_yaml()
    alive = [read_shard(w.run_dir) for w in workers if w.proc.returncode == 0 and w.run_dir is not None]
    if not alive:
        raise RuntimeError("every worker died: " + "; ".join(f"{w.index}: exit {w.proc.returncode}" for w in workers))
    died, lines = [], []
    for w in workers:
        if w.proc.returncode != 0 or w.run_dir is None:
            shard = _dead(w, alive[0], text)
            died.append(shard)
            share = planned(scenario, Shard(w.index, len(workers)))
            lost = "" if share is None else f", {share - len(shard.records)} of its {share} requests never sent"
            lines.append(f"worker {w.index} died (exit {w.proc.returncode}): its {len(shard.records)} finished "
                         f"records kept{lost}; log: {w.reports.parent / f'{w.index}.log'}")
    # A death is said per shard (`run.shards[].stopped`); the run's own `stopped` stays a signal's.
    header = {"endpoint": {**alive[0].saved["run"]["endpoint"], "bundled_simulator": bundled},
              "stopped": next((s.saved["run"]["stopped"] for s in alive if s.saved["run"].get("stopped")), None)}
    return merge_runs([*alive, *died], run_dir, header), lines
