"""Does the harness deliver the arrival process it promises, as seen by the server?

Poisson at 100 and 400 requests/s and constant at 400 requests/s, each for 20 s, against the
bundled simulator in fixed-timing mode (2 ms TTFT, 1 ms ITL, 2 output tokens: the server is never
the bottleneck), harness and simulator pinned to separate cores. Arrival times are the ones *the
simulator recorded* (ground truth by request id), so the numbers include everything between the
schedule and the wire. Reports achieved rate, inter-arrival CV, the Kolmogorov-Smirnov distance of
the gaps to the exponential of the target rate, and the harness's schedule lag p99 — for the
schedule itself (a seeded sample: a 20 s Poisson sample's own rate is within ±2% of its target
only two times in three), for the harness's `sent` stamps, and for the server's arrival stamps.
Traffic goes to 127.0.0.1 only; each run is bounded by its duration.

With `--exporter`, the harness also serves its Prometheus metrics (`--metrics-port`) and a thread scrapes
them once a second, as Prometheus would: the exporter's cost on the schedule, measured.

    .venv/bin/python bench/pacing.py [--seconds 20] [--exporter]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.gctune import tune_for_timing
from harness.records import read_records
from harness.run.exporter import LiveMetrics
from harness.run.runner import run_scenario
from harness.run.simulator import bundled_simulator
from harness.tools.calibrate import _truth


def ks_exponential(gaps_s: np.ndarray, rate: float) -> float:
    x = np.sort(gaps_s)
    n = len(x)
    cdf = 1 - np.exp(-rate * x)
    return float(max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n)))


def ks_two_sample(a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance between the two empirical CDFs: how much pacing distorted the schedule's gaps."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, "right") / len(a)
    cdf_b = np.searchsorted(b, grid, "right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


@contextlib.contextmanager
def scraped_exporter(name: str) -> Iterator[LiveMetrics]:
    """The live exporter on a free loopback port, scraped once a second from another thread."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics = LiveMetrics(name)
    metrics.serve(port, "127.0.0.1")
    stop = threading.Event()

    def scrape() -> None:
        while not stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                r.read()

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        yield metrics
    finally:
        stop.set()
        thread.join()
        metrics.close()


async def one(kind: str, rate: float, seconds: float, workdir: Path, exporter: bool = False) -> dict[str, Any]:
    scenario = parse_scenario({
        "name": f"pacing-{kind}-{rate:g}", "workload": {"prompt_tokens": 8, "output_tokens": 2},
        # Rendering /metrics holds the simulator's event loop for about a millisecond, and arrivals stamped
        # behind it would show as the harness's jitter: this bench measures the harness, so no scraping.
        "endpoint": {"scrape_interval_s": 0},
        "phases": [{"name": "p", "load": {"type": kind, "rate": rate, "duration_s": seconds}}],
    }, "bench")
    sim = SimulatorConfig(timing="fixed", fixed_ttft_ms=2, fixed_itl_ms=1)
    tune_for_timing()
    async with bundled_simulator(sim, pin=True) as (url, model):
        run_dir = workdir / scenario.name
        with scraped_exporter(scenario.name) if exporter else contextlib.nullcontext() as metrics:
            result = await run_scenario(scenario, Endpoint(url, model), run_dir, metrics=metrics)
        records = list(read_records(run_dir / "requests.jsonl"))
        truth = await _truth(url, [r.request_id for r in records])
    (phase,) = result.summary.phases
    views = {
        "schedule": [r.intended_ns for r in records],
        "harness sent": [r.sent_ns for r in records if r.sent_ns is not None],
        "server saw": [t["arrival_ns"] for t in truth.values()],
    }
    out: dict[str, Any] = {"kind": kind, "rate": rate, "requests": len(records), "ok": phase.requests.ok,
                           "lag_p99_ms": phase.latency_ms.schedule_lag.p99, "views": {}}
    planned = np.diff(np.sort(np.asarray(views["schedule"], dtype=np.int64))) / 1e9
    for name, stamps in views.items():
        t = np.sort(np.asarray(stamps, dtype=np.int64))
        gaps = np.diff(t) / 1e9
        out["views"][name] = {
            "rate": (len(t) - 1) / ((t[-1] - t[0]) / 1e9), "cv": float(gaps.std() / gaps.mean()),
            "ks": ks_exponential(gaps, rate) if kind == "poisson" else None,
            "ks_vs_schedule": ks_two_sample(gaps, planned) if kind == "poisson" else None,
        }
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--exporter", action="store_true", help="serve and scrape the live Prometheus metrics")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind, rate in (("poisson", 100.0), ("poisson", 400.0), ("constant", 400.0)):
            r = await one(kind, rate, args.seconds, Path(tmp), args.exporter)
            print(f"{kind} {rate:.0f}/s: {r['requests']} requests ({r['ok']} ok), "
                  f"schedule lag p99 {r['lag_p99_ms']:.2f} ms", flush=True)
            schedule_rate = r["views"]["schedule"]["rate"]
            for name, v in r["views"].items():
                ks = "" if v["ks"] is None else f"  KS {v['ks']:.4f} (vs schedule {v['ks_vs_schedule']:.4f})"
                print(f"  {name:>12}: rate {v['rate']:8.2f}/s ({(v['rate'] / rate - 1) * 100:+.2f}% of target, "
                      f"{(v['rate'] / schedule_rate - 1) * 100:+.2f}% of schedule)  gap CV {v['cv']:.3f}{ks}",
                      flush=True)


if __name__ == "__main__":
    asyncio.run(main())
