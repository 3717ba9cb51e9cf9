"""The bundled simulator's memory under a long run: `harness sim serve` (default roofline model) in its own
process on the last core, driven at a constant rate by the harness on the others for `--seconds`, its resident
memory read from /proc every 5 s. A simulator left running as a test target must stay flat: every per-request
state freed, every cache bounded (its ground truth of each request is kept two minutes; the prefix cache's
bookkeeping is allocated with the pool), so the slope after the first minute must stay under 1 MiB/min and
the one over the last half ~0.

    .venv/bin/python bench/sim_memory.py [--seconds 600] [--rate 30]

Traffic goes to 127.0.0.1 only; bounded by --seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.run.runner import run_scenario

SAMPLE_S = 5.0


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _sample(pid: int, out: list[tuple[float, float]], start: float) -> None:
    while True:
        out.append((time.monotonic() - start, rss_mib(pid)))
        await asyncio.sleep(SAMPLE_S)


async def drive(url: str, pid: int, seconds: float, rate: float, workdir: Path) -> list[tuple[float, float]]:
    scenario = parse_scenario({
        "name": "sim-memory", "workload": {"prompt_tokens": 64, "output_tokens": 32},
        "client": {"records_in_memory": 5000}, "endpoint": {"scrape_interval_s": 1.0},
        "phases": [{"name": "constant", "load": {"type": "constant", "rate": rate, "duration_s": seconds}}],
    }, "sim-memory")
    samples: list[tuple[float, float]] = []
    sampler = asyncio.ensure_future(_sample(pid, samples, time.monotonic()))
    try:
        result = await run_scenario(scenario, Endpoint(url, "llama-3.1-8b"), workdir / "run")
    finally:
        sampler.cancel()
    samples.append((samples[-1][0] + SAMPLE_S, rss_mib(pid)))
    (phase,) = result.summary.phases
    print(f"{phase.requests.total:,} requests ({phase.requests.ok:,} ok) at {rate:g}/s in {seconds:.0f} s")
    return samples


def report(samples: list[tuple[float, float]], seconds: float) -> None:
    t = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])

    def slope(inside: np.ndarray) -> str:
        if inside.sum() < 3:
            return "too few samples"
        per_min = float(np.polyfit(t[inside], rss[inside], 1)[0] * 60)
        return f"{per_min:+.3f} MiB/min ({t[inside][0]:.0f}–{t[inside][-1]:.0f} s)"

    print(f"simulator RSS MiB: first {rss[0]:.1f}, at 60 s {rss[t >= 60][0] if (t >= 60).any() else rss[-1]:.1f}, "
          f"last {rss[-1]:.1f}, max {rss.max():.1f}")
    print(f"  slope after the first minute: {slope(t >= 60)}")
    print(f"  slope after minute 10:        {slope(t >= 600)}")
    print(f"  slope over the last half:     {slope(t >= seconds / 2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=30.0)
    args = parser.parse_args()
    last = max(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, {last}))
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["url"]
        others = os.sched_getaffinity(0) - {last}
        if others:
            os.sched_setaffinity(0, others)
        with tempfile.TemporaryDirectory() as tmp:
            samples = asyncio.run(drive(url, proc.pid, args.seconds, args.rate, Path(tmp)))
        report(samples, args.seconds)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
