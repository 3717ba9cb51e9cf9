"""Does "client limited" flag the figures the client really moved? The per-figure judgement against ground truth.

The bundled simulator (pinned to the last core) serves a Poisson load; the harness (pinned to the first core)
measures it, quiet, and then with a busy loop pinned to the harness's own core. For each run and each judged
figure (TTFT, ITL, TPOT and E2E at p50, p90, p99 and the mean) the real error is the harness's figure against the
same figure computed from the simulator's own record of when it read each request and wrote each token
(`/sim/truth`, one monotonic clock); the flag is the run's `client_limited_metrics`. The table counts how often the
flag agreed with the real error being over the share (5%), and the rows the judgement missed or raised in vain.

    .venv/bin/python bench/client_shift.py [--runs 5] [--requests 60] [--rate 8] [--share 0.05] [--workers N]
                                           [--unpinned] [--quiet-only] [--concurrency N] [--prompt-tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from harness.records_read import read_records
from harness.stats.schema import read_summary
from harness.tools.calibrate import Truth, ground_truth

LATENCIES = ("ttft", "itl", "tpot", "e2e")
STATS = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "mean": None}


def _stat(values: list[float], q: float | None) -> float:
    return float(np.mean(values)) if q is None else float(np.percentile(values, q))


def truth_values(truths: list[Truth]) -> dict[str, list[float]]:
    """Each latency as the simulator saw it: from reading the request to writing its tokens (ms)."""
    out: dict[str, list[float]] = {k: [] for k in LATENCIES}
    for t in truths:
        tokens = np.asarray(t["token_ns"], dtype=np.float64)
        if not tokens.size:
            continue
        out["ttft"].append((tokens[0] - t["arrival_ns"]) / 1e6)
        out["e2e"].append((tokens[-1] - t["arrival_ns"]) / 1e6)
        if tokens.size > 1:
            out["itl"] += list(np.diff(tokens) / 1e6)
            out["tpot"].append((tokens[-1] - tokens[0]) / (tokens.size - 1) / 1e6)
    return out


def _serve() -> tuple[subprocess.Popen[str], str]:
    cores = sorted(os.sched_getaffinity(0))
    proc = subprocess.Popen(["taskset", "-c", str(cores[-1]), sys.executable, "-m", "harness", "sim", "serve",
                             "--port", "0", "--host", "127.0.0.1"], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


def one_run(url: str, out: Path, seed: int, args: argparse.Namespace, hog: bool) -> list[tuple[str, float, bool,
                                                                                                  float]]:
    """(figure, real error share, flagged, estimated share) for every judged figure of one run."""
    core = str(sorted(os.sched_getaffinity(0))[0])
    busy = subprocess.Popen(["taskset", "-c", core, sys.executable, "-c", "while True: pass"]) if hog else None
    # --unpinned: the harness (and its workers) where the OS puts them, beside the simulator, as a CI runner does.
    pin = [] if args.unpinned else ["taskset", "-c", core]
    workers = ["--workers", str(args.workers)] if args.workers else []
    try:
        subprocess.run([*pin, sys.executable, "-m", "harness", "run", "--endpoint", url,
                        *(["--concurrency", str(args.concurrency)] if args.concurrency else ["--rate", str(args.rate)]),
                        "--requests", str(args.requests), "--prompt-tokens", str(args.prompt_tokens),
                        "--output-tokens", "64", "--seed", str(seed), "--progress", "off", "--no-pin", *workers,
                        "--reports-dir", str(out)], check=True, capture_output=True, text=True, timeout=600)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    run_dir = next(out.iterdir())
    phase = read_summary(run_dir / "summary.json").phases[0]
    records = [r for r in read_records(run_dir / "requests.jsonl") if r.status == "ok"]
    truths = list(asyncio.run(ground_truth(url, [r.request_id for r in records])).values())
    real = truth_values(truths)
    rows = []
    for latency in LATENCIES:
        for stat, q in STATS.items():
            name = f"{latency}_{stat}"
            measured = getattr(getattr(phase.latency_ms, latency), "mean" if q is None else stat)
            true = _stat(real[latency], q)
            rows.append((name, abs(measured / true - 1), name in phase.client_limited_metrics,
                         phase.client_moved.get(name, 0.0)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs quiet and runs with the hog, each")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--rate", type=float, default=8.0)
    parser.add_argument("--share", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=0, help="a closed loop of this many users, not --rate")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--workers", type=int, default=0, help="the harness's --workers (0: one process)")
    parser.add_argument("--unpinned", action="store_true", help="do not pin the harness to the first core")
    parser.add_argument("--quiet-only", action="store_true", help="skip the runs with a busy loop")
    args = parser.parse_args()
    sim, url = _serve()
    try:
        for hog in (False,) if args.quiet_only else (False, True):
            tally: Counter[str] = Counter()
            worst: list[tuple[float, str, bool, float]] = []
            for k in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    for name, error, flag, estimate in one_run(url, Path(tmp), 100 + k, args, hog):
                        over = error > args.share
                        tally[{(True, True): "flagged, real", (True, False): "flagged in vain",
                               (False, True): "missed", (False, False): "quiet, right"}[(flag, over)]] += 1
                        worst.append((error, name, flag, estimate))
            label = "busy loop on the harness's core" if hog else "quiet"
            print(f"\n{label}: {args.runs} runs × {len(LATENCIES) * len(STATS)} figures: {dict(tally)}")
            print(" real error  estimate  flagged  figure   (the largest errors, then every miss and vain flag)")
            largest = sorted(worst, reverse=True)[:5]
            wrong = [w for w in sorted(worst, reverse=True) if w[2] != (w[0] > args.share) and w not in largest]
            for error, name, flag, estimate in largest + wrong:
                print(f"  {error:8.1%}  {estimate:8.1%}  {'yes' if flag else 'no':>7}  {name}")
    finally:
        sim.terminate()
        sim.wait(timeout=30)


if __name__ == "__main__":
    main()
