"""Soak: constant load against the bundled simulator for ten minutes, sampling the harness's own resident
memory and open file descriptors every second. Descriptors must stay flat; memory grows by the records kept
for the final report (~2.2 KiB each at 32 tokens) and nothing else — the slope it prints gives the estimate for
a 24-hour soak in docs/benchmarks.md.

Constant 20 req/s, 64-token prompts, 32-token answers, fixed-timing simulator (no load-dependent latency),
harness and simulator pinned to separate cores. Traffic goes to 127.0.0.1 only; bounded by --seconds.

    .venv/bin/python bench/soak.py [--seconds 600] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import numpy as np

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.gctune import tune_for_timing
from harness.run.runner import run_scenario
from harness.run.simulator import bundled_simulator


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _sample(out: list[tuple[float, float, int]], start: float) -> None:
    loop = asyncio.get_running_loop()
    while True:
        out.append((loop.time() - start, _rss_mib(), _fds()))
        await asyncio.sleep(1.0)


async def soak(seconds: float, rate: float, workdir: Path) -> list[tuple[float, float, int]]:
    scenario = parse_scenario({
        "name": "soak", "workload": {"prompt_tokens": 64, "output_tokens": 32},
        "endpoint": {"scrape_interval_s": 1.0},
        "phases": [{"name": "constant", "load": {"type": "constant", "rate": rate, "duration_s": seconds}}],
    }, "soak")
    samples: list[tuple[float, float, int]] = []
    tune_for_timing()
    async with bundled_simulator(SimulatorConfig(timing="fixed", fixed_ttft_ms=20, fixed_itl_ms=5), pin=True) as (
            url, model):
        sampler = asyncio.ensure_future(_sample(samples, asyncio.get_running_loop().time()))
        try:
            result = await run_scenario(scenario, Endpoint(url, model), workdir / "soak")
        finally:
            sampler.cancel()
    (phase,) = result.summary.phases
    print(f"{phase.requests.total:,} requests ({phase.requests.ok:,} ok) in {seconds:.0f} s")
    return samples


def report(samples: list[tuple[float, float, int]], rate: float) -> None:
    t = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])
    fds = np.array([s[2] for s in samples])
    settled = t >= min(60.0, t[-1] / 2)  # after the first minute: imports, pools and caches are warm
    slope = np.polyfit(t[settled], rss[settled], 1)[0] * 60 if settled.sum() > 2 else float("nan")
    print(f"RSS MiB: first {rss[0]:.1f}, after the first minute {rss[settled][0]:.1f}, last {rss[-1]:.1f}, "
          f"max {rss.max():.1f}; trend after the first minute {slope:+.2f} MiB/min "
          f"= {slope / (rate * 60) * 1e3:.2f} MiB per 1,000 requests (each record is kept for the final report)")
    print(f"open fds: first {fds[0]} (before the pool is opened), after the first minute min "
          f"{fds[settled].min()}, max {fds[settled].max()}, last {fds[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report(asyncio.run(soak(args.seconds, args.rate, Path(tmp))), args.rate)


if __name__ == "__main__":
    main()
