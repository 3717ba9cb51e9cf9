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

Two more cases take the stream shapes and prompts users meet (issue 16): Poisson 400/s of 50-token prompts
and Poisson 100/s of 2,000-token prompts, both built with a real byte-level BPE tokenizer (trained here,
vocabulary 4,000), `/v1/completions`, 16-token answers from a simulator at TTFT 20 ms and ITL 5 ms that
writes every event on its own (`stream_writes: token`).

With `--exporter`, the harness also serves its Prometheus metrics (`--metrics-port`) and a thread scrapes
them once a second, as Prometheus would: the exporter's cost on the schedule, measured.

    .venv/bin/python bench/pacing.py [--seconds 20] [--exporter] [--cases words,tokenizer]
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness import loop as event_loop
from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.gctune import tune_for_timing
from harness.records_read import read_records
from harness.run.exporter import LiveMetrics
from harness.run.runner import run_scenario
from harness.run.simulator import bundled_simulator
from harness.tools.calibrate import ground_truth
from harness.workload.tokenizer import train_demo_tokenizer


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


WORDS_SIM = SimulatorConfig(timing="fixed", fixed_ttft_ms=2, fixed_itl_ms=1)
TOKEN_SIM = SimulatorConfig(timing="fixed", fixed_ttft_ms=20, fixed_itl_ms=5, stream_writes="token")


@dataclass(frozen=True)
class Case:
    kind: str
    rate: float
    prompt_tokens: int = 8
    output_tokens: int = 2
    tokenizer: bool = False
    sim: SimulatorConfig = WORDS_SIM

    @property
    def label(self) -> str:
        prompts = f", {self.prompt_tokens}-token BPE prompts, one token a write" if self.tokenizer else ""
        return f"{self.kind} {self.rate:.0f}/s{prompts}"


CASES = {
    "words": [Case("poisson", 100.0), Case("poisson", 400.0), Case("constant", 400.0)],
    "tokenizer": [Case("poisson", 400.0, 50, 16, True, TOKEN_SIM), Case("poisson", 100.0, 2000, 16, True, TOKEN_SIM)],
}


async def one(case: Case, seconds: float, workdir: Path, exporter: bool = False) -> dict[str, Any]:
    kind, rate = case.kind, case.rate
    workload: dict[str, Any] = {"prompt_tokens": case.prompt_tokens, "output_tokens": case.output_tokens}
    if case.tokenizer:
        workload["tokenizer"] = str(train_demo_tokenizer(workdir / "tokenizer"))
    scenario = parse_scenario({
        "name": f"pacing-{kind}-{rate:g}-{case.prompt_tokens}", "workload": workload,
        # Rendering /metrics holds the simulator's event loop for about a millisecond, and arrivals stamped
        # behind it would show as the harness's jitter: this bench measures the harness, so no scraping.
        "endpoint": {"scrape_interval_s": 0},
        "phases": [{"name": "p", "load": {"type": kind, "rate": rate, "duration_s": seconds}}],
    }, "bench")
    tune_for_timing()
    async with bundled_simulator(case.sim, pin=True) as (url, model):
        run_dir = workdir / scenario.name
        endpoint = Endpoint(url, model, api="completions" if case.tokenizer else "chat")
        with scraped_exporter(scenario.name) if exporter else contextlib.nullcontext() as metrics:
            result = await run_scenario(scenario, endpoint, run_dir, metrics=metrics)
        records = list(read_records(run_dir / "requests.jsonl"))
        truth = await ground_truth(url, [r.request_id for r in records])
    (phase,) = result.summary.phases
    views = {
        "schedule": [r.intended_ns for r in records],
        "harness sent": [r.sent_ns for r in records if r.sent_ns is not None],
        "server saw": [t["arrival_ns"] for t in truth.values()],
    }
    out: dict[str, Any] = {"kind": kind, "rate": rate, "requests": len(records), "ok": phase.requests.ok,
                           "lag_p99_ms": phase.latency_ms.schedule_lag.p99,
                           "lag_p50_ms": phase.latency_ms.schedule_lag.p50, "views": {}}
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
    parser.add_argument("--cases", default="words,tokenizer", help="words, tokenizer or both")
    parser.add_argument("--only", type=int, default=None, help="run only the case of this index in the list")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for name in args.cases.split(",") for c in CASES[name]]
        for case in cases if args.only is None else [cases[args.only]]:
            r = await one(case, args.seconds, Path(tmp), args.exporter)
            rate = case.rate
            print(f"{case.label}: {r['requests']} requests ({r['ok']} ok), "
                  f"schedule lag p50 {r['lag_p50_ms']:.2f} p99 {r['lag_p99_ms']:.2f} ms", flush=True)
            schedule_rate = r["views"]["schedule"]["rate"]
            for name, v in r["views"].items():
                ks = "" if v["ks"] is None else f"  KS {v['ks']:.4f} (vs schedule {v['ks_vs_schedule']:.4f})"
                print(f"  {name:>12}: rate {v['rate']:8.2f}/s ({(v['rate'] / rate - 1) * 100:+.2f}% of target, "
                      f"{(v['rate'] / schedule_rate - 1) * 100:+.2f}% of schedule)  gap CV {v['cv']:.3f}{ks}",
                      flush=True)


if __name__ == "__main__":
    event_loop.run(main())
