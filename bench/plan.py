"""`harness plan`'s search at scale (issue 66): every deployment of four accelerators within 16 devices for
scenarios/plan-70b.yaml, the fast search on every core, timed; with --exhaustive-grid, the fast and the
exhaustive search on the 40-deployment grid the test uses, their picks side by side. No network.

    python bench/plan.py [--workers 2] [--requests 400] [--exhaustive-grid]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.config.scenario import load_scenario
from harness.plan.bound import starts
from harness.plan.front import cheapest, rows
from harness.plan.search import search
from harness.plan.space import deployments
from harness.plan.trial import Slos, plan_requests

ROOT = Path(__file__).resolve().parents[1]
PRICES = {"h100-sxm": 2.5, "a100-80g": 1.6, "h200": 3.6, "b200": 5.5}  # $/GPU-hour, assumed for the bench


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--exhaustive-grid", action="store_true")
    args = parser.parse_args()
    scenario = load_scenario(ROOT / "scenarios" / "plan-70b.yaml")
    base, target = scenario.simulator, 8.0
    slos = Slos(1.0, 0.060, 0.9)
    reqs = plan_requests(scenario, args.requests)
    devices, budget = (["h100-sxm", "a100-80g", "h200"], 8) if args.exhaustive_grid else (list(PRICES), 16)
    grid = deployments(devices, budget, lambda a, tp: starts(base, a, tp))
    for fast in (True, False) if args.exhaustive_grid else (True,):
        began = time.perf_counter()
        measured = search(base, grid, reqs, slos, prices=PRICES, target=target, fast=fast, workers=args.workers)
        seconds = time.perf_counter() - began
        pick = cheapest(rows(measured, PRICES, reqs.mean_output), target)
        simulated = sum(m.capacity is not None for m in measured)
        print(f"{'fast' if fast else 'exhaustive'}: {len(grid)} deployments, {simulated} simulated, "
              f"{sum(m.trials for m in measured)} trials, {seconds:.1f} s on {args.workers} workers; cheapest "
              f"at {target:g} req/s: {pick.measured.deployment.text() if pick else 'none'}"
              f"{f' ({pick.measured.capacity:.2f} req/s)' if pick else ''}")


if __name__ == "__main__":
    main()
