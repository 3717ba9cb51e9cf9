"""How often the split-run alarms fire without cause, and whether they fire with one (issue 47).

Two alarms, each run both ways against `harness sim serve` on loopback, many times:

- **A worker named frozen** ("worker 1 has said nothing for 2 s", `SILENT_S`): A/A is `--workers 2` of a small
  two-phase scenario, nothing done to it; the real case SIGSTOPs worker 1 for 3 s mid-phase.
- **A shard by hand out of step** (a phase marked incomplete: "shard 1/2 began it 0.3 s late", `DISTORTED_MS`):
  A/A is two `--shard i/2` processes launched together with the documented lead (`LEAD_S`), merged; the real case
  launches shard 1 three seconds after the common start (`--late-ok`).

Each run also counts its phases called client-limited. `--hog` keeps a busy loop on every core throughout (the
shared CI runner users have). Bounded: `--runs` A/A runs and `--real` real runs of each, ~10 s each; traffic to
127.0.0.1 only.

    .venv/bin/python bench/shard_alarms.py [--runs 10] [--real 3] [--hog]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.run.distributed.sharding import LEAD_S

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = """name: alarms
workload: {prompt_tokens: 64, output_tokens: 32}
phases:
  - {name: interactive, load: {type: poisson, rate: 8, requests: 40}}
  - {name: batch, load: {type: batch, size: 4, batches: 3}}
"""
FROZEN = "has said nothing for"


@dataclass
class Tally:
    runs: int = 0
    fired: int = 0
    phases: int = 0
    limited: int = 0
    why: list[str] = field(default_factory=list)

    def add(self, fired: str | None, summary: dict[str, Any]) -> None:
        self.runs += 1
        self.fired += fired is not None
        if fired:
            self.why.append(fired)
        self.phases += len(summary["phases"])
        self.limited += sum(bool(p["client_limited"]) for p in summary["phases"])

    def line(self, name: str) -> str:
        return (f"{name:<44} fired in {self.fired:>2} of {self.runs:>2} runs; client-limited phases "
                f"{self.limited} of {self.phases}")


def _spin() -> None:
    while True:
        pass


def _summary(reports: Path) -> dict[str, Any]:
    (run_dir,) = (d for d in reports.iterdir() if d.is_dir())
    return dict(json.loads((run_dir / "summary.json").read_text()))


def _workers(url: str, work: Path, stop_s: float | None) -> tuple[str | None, dict[str, Any]]:
    """One `--workers 2` run; with `stop_s`, worker 1 SIGSTOPped that long once it has sent a record."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(work / "s.yaml"), "--endpoint", url,
                             "--workers", "2", "--progress", "lines", "--reports-dir", str(work / "r")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if stop_s is not None:
        pid = _worker_pid(work / "r")
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stop_s)
        os.kill(pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=180)
    said = [line for line in err.splitlines() if FROZEN in line]
    return (said[0].strip()[:120] if said else None), _summary(work / "r")


def _worker_pid(reports: Path) -> int:
    for _ in range(600):
        if (pids := list(reports.glob("*/workers/pids"))) and list(reports.glob("*/workers/1/*/requests.jsonl")) \
                and next(iter(reports.glob("*/workers/1/*/requests.jsonl"))).stat().st_size:
            return int(dict(line.split()[:2] for line in pids[0].read_text().splitlines())["1"])
        time.sleep(0.05)
    raise RuntimeError("worker 1 never wrote a record")


def _by_hand(url: str, work: Path, late_s: float) -> tuple[str | None, dict[str, Any]]:
    """Two shards by hand on one start `LEAD_S` ahead, shard 1 launched `late_s` after it; merged."""
    start_at = time.time() + LEAD_S
    procs = []
    for i in range(2):
        if i == 1 and late_s:
            time.sleep(max(0.0, start_at + late_s - time.time()))
        procs.append(subprocess.Popen([sys.executable, "-m", "harness", "run", str(work / "s.yaml"), "--endpoint",
                                       url, "--shard", f"{i}/2", "--start-at", repr(start_at), "--late-ok",
                                       "--progress", "off", "--reports-dir", str(work / str(i))], cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for proc in procs:
        proc.wait(timeout=180)
    merged = subprocess.run([sys.executable, "-m", "harness", "merge", *map(str, work.glob("[01]/*")), "--out",
                             str(work / "m" / "run")], cwd=ROOT, capture_output=True, text=True, timeout=180)
    if merged.returncode not in (0, 3):
        raise RuntimeError(f"merge exit {merged.returncode}: {merged.stderr[-400:]}")
    summary = _summary(work / "m")
    marked = [f"{p['name']}: {p['incomplete']}" for p in summary["phases"] if p.get("incomplete")]
    return (marked[0][:120] if marked else None), summary


def _tally(times: int, url: str, one: Callable[[str, Path], tuple[str | None, dict[str, Any]]]) -> Tally:
    tally = Tally()
    for _ in range(times):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "s.yaml").write_text(SCENARIO)
            tally.add(*one(url, work))
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="A/A runs of each alarm")
    parser.add_argument("--real", type=int, default=3, help="runs of each real case")
    parser.add_argument("--hog", action="store_true", help="a busy loop on every core throughout")
    args = parser.parse_args()
    sim = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0"], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)
    hogs: list[multiprocessing.Process] = []
    try:
        assert sim.stdout is not None
        url = json.loads(sim.stdout.readline())["url"]
        if args.hog:
            hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
            for hog in hogs:
                hog.start()
        cases = [("frozen worker, A/A (--workers 2)", args.runs, lambda u, w: _workers(u, w, None)),
                 ("frozen worker, real (SIGSTOP 3 s)", args.real, lambda u, w: _workers(u, w, 3.0)),
                 (f"shard out of step, A/A (lead {LEAD_S:g} s)", args.runs, lambda u, w: _by_hand(u, w, 0.0)),
                 ("shard out of step, real (launched 3 s late)", args.real, lambda u, w: _by_hand(u, w, 3.0))]
        print(f"{'busy (a loop on every core)' if args.hog else 'quiet'}:")
        for name, times, one in cases:
            tally = _tally(times, url, one)
            print(tally.line(name), flush=True)
            for why in tally.why[:2]:
                print(f"    e.g. {why}")
    finally:
        for hog in hogs:
            hog.terminate()
        sim.terminate()
        sim.wait(timeout=15)


if __name__ == "__main__":
    main()
