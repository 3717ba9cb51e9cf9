"""Soak: constant load against the bundled simulator for ten minutes, sampling the harness's own resident
memory and open file descriptors every second. Descriptors must stay flat; memory grows by the records kept
for exact statistics and the final report (~0.8 KiB each at 32 tokens) until the run has ended
`--records-in-memory` of them, and not after — the slopes it prints give the estimate for a 24-hour soak in
docs/benchmarks.md.

Constant 20 req/s, 64-token prompts, 32-token answers, fixed-timing simulator (no load-dependent latency),
harness and simulator pinned to separate cores. Traffic goes to 127.0.0.1 only; bounded by --seconds.

    .venv/bin/python bench/soak.py [--seconds 600] [--rate 20] [--records-in-memory N]
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


async def soak(seconds: float, rate: float, workdir: Path, cap: int | None) -> list[tuple[float, float, int]]:
    scenario = parse_scenario({
        "name": "soak", "workload": {"prompt_tokens": 64, "output_tokens": 32}, "client": {"records_in_memory": cap},
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


def _slope(t: np.ndarray, rss: np.ndarray, inside: np.ndarray) -> float:
    return float(np.polyfit(t[inside], rss[inside], 1)[0] * 60) if inside.sum() > 2 else float("nan")


def report(samples: list[tuple[float, float, int]], rate: float, seconds: float, cap: int | None) -> None:
    t = np.array([s[0] for s in samples])
    rss = np.array([s[1] for s in samples])
    fds = np.array([s[2] for s in samples])
    # After the first minute (imports, pools and caches warm), before the phase's end (the reports load pandas).
    settled = (t >= min(60.0, seconds / 2)) & (t <= seconds)
    over = seconds if cap is None else cap / rate  # when the run has ended more records than it keeps
    before, after = settled & (t <= over), settled & (t > over + 10)
    print(f"RSS MiB: first {rss[0]:.1f}, after the first minute {rss[settled][0]:.1f}, at the phase's end "
          f"{rss[t <= seconds][-1]:.1f}, max {rss.max():.1f} (reports included)")
    for name, inside in (("holding every record", before), (f"past {cap:,} records" if cap else "", after)):
        if inside.sum() > 2:
            slope = _slope(t, rss, inside)
            print(f"  trend {name} ({t[inside][0]:.0f}–{t[inside][-1]:.0f} s): {slope:+.3f} MiB/min = "
                  f"{slope / (rate * 60) * 1e3:.3f} MiB per 1,000 requests")
    print(f"open fds: first {fds[0]} (before the pool is opened), after the first minute min "
          f"{fds[settled].min()}, max {fds[settled].max()}, last {fds[-1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--records-in-memory", type=int, default=None, help="the scenario's client.records_in_memory "
                        "(default: none, every record held)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        samples = asyncio.run(soak(args.seconds, args.rate, Path(tmp), args.records_in_memory))
        report(samples, args.rate, args.seconds, args.records_in_memory)


if __name__ == "__main__":
    main()
