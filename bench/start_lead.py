"""How long a shard by hand takes from its launch to being ready to start (`run.shard.ready_s`: Python and the
harness loaded, its requests built, its connections open) — the least lead `--start-at` needs — on this machine,
quiet or with a busy loop on every core (`--hog`). docs/load-engine.md, "One start".

Each round launches `--shards` shards of one small run at once against a bundled simulator on 127.0.0.1, with a
common start 15 s ahead, and reads each shard's `ready_s` from its `shard.json`.

    .venv/bin/python bench/start_lead.py [--rounds 3] [--shards 2] [--hog]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = """name: lead
workload: {prompt_tokens: 16, output_tokens: 4}
phases:
  - {name: open, load: {type: constant, rate: 20, requests: 8}}
"""
LEAD_S = 15.0


def _spin() -> None:
    while True:
        pass


def _round(url: str, shards: int, work: Path) -> list[float]:
    start_at = time.time() + LEAD_S
    (work / "s.yaml").write_text(SCENARIO)
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", str(work / "s.yaml"), "--endpoint", url,
                               "--shard", f"{i}/{shards}", "--start-at", repr(start_at), "--progress", "off",
                               "--reports-dir", str(work / str(i))], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for i in range(shards)]
    for proc in procs:
        proc.wait(timeout=120)
    return [json.loads(next((work / str(i)).glob("*/shard.json")).read_text())["run"]["shard"]["ready_s"]
            for i in range(shards)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--hog", action="store_true", help="a busy loop on every core while the shards start")
    args = parser.parse_args()
    sim = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--timing", "fixed"],
                           cwd=ROOT, stdout=subprocess.PIPE, text=True)
    hogs: list[multiprocessing.Process] = []
    try:
        assert sim.stdout is not None
        url = json.loads(sim.stdout.readline())["url"]
        if args.hog:
            hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
            for hog in hogs:
                hog.start()
        ready: list[float] = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as work:
                ready += _round(url, args.shards, Path(work))
    finally:
        for hog in hogs:
            hog.terminate()
        sim.terminate()
        sim.wait(timeout=15)
    print(f"{'busy (a loop on every core)' if args.hog else 'quiet'}: {len(ready)} shards ready "
          f"{min(ready):.2f} / {statistics.median(ready):.2f} / {max(ready):.2f} s after launch (min / median / max); "
          f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
