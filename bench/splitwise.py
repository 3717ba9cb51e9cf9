"""Splitwise's comparison on its own setup, in virtual time (issue 66; docs/fleets.md, "Beside Splitwise").

Llama-2-70B on DGX machines (8 GPUs, tp 8) of A100s and H100s; the Azure 2023 conversation and code traces'
lengths; Splitwise's designs: Baseline-A100 and Baseline-H100 (every machine prefills and decodes), Splitwise-AA,
-HH, -HA (H100 prompt machines, A100 token machines) and -HHcap (token machines power-capped), the KV moved layer
by layer over the machines' InfiniBand (NDR on H100s, HDR where an A100 machine is on either side). Each design's
deployments up to twice the cost of --baseline Baseline-H100 machines, each one's capacity at the SLOs (`harness
plan`'s search, per design); then per design: the most throughput the Baseline-H100 budget buys, and the cost of
carrying what those machines carry.

    python bench/splitwise.py [--requests 400] [--baseline 2] [--baseline-scheduler 0.4] [--workers 2]
                              [--first-token prefill|decode]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.config.fleet import Pool
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import load_presets
from harness.plan.search import Sized, search
from harness.plan.space import Deployment
from harness.plan.trial import PlanRequests, Slos, plan_requests

ROOT = Path(__file__).resolve().parents[1]
A100, H100, CAPPED = "a100-80g", "h100-sxm", "h100-cap70"
PRICES = {A100: 1.6, H100: 2.5, CAPPED: 2.5}  # $/GPU-hour, this repository's illustration
# a design: (the prompt machines' accelerator, or None for every machine doing both; the token machines')
DESIGNS: dict[str, tuple[str | None, str]] = {
    "Baseline-A100": (None, A100), "Baseline-H100": (None, H100), "Splitwise-AA": (A100, A100),
    "Splitwise-HH": (H100, H100), "Splitwise-HA": (H100, A100), "Splitwise-HHcap": (H100, CAPPED)}
ON_HDR = {A100}  # DGX-A100s have HDR InfiniBand: a transfer with one on either side runs at its speed


def design_of(d: Deployment) -> tuple[str | None, str]:
    return (d.prefill.accelerator if d.prefill is not None else None, d.decode.accelerator)


def machines(accelerator: str, count: int) -> Pool:
    return Pool(accelerator=accelerator, tp=8, replicas=count)


def candidates(most: int) -> list[Deployment]:
    found = []
    for prompt, token in DESIGNS.values():
        if prompt is None:
            found += [Deployment(machines(token, n)) for n in range(1, most + 1)]
            continue
        link = "infiniband-hdr" if {prompt, token} & ON_HDR else "infiniband"
        found += [Deployment(machines(token, t), machines(prompt, p), "least_outstanding", link)  # type: ignore[arg-type]
                  for p in range(1, most) for t in range(1, most - p + 1)]
    return found


def per_design(measured: list[Sized], budget: float, carried: float) -> dict[str, tuple[float, float | None]]:
    """Per design: (the most req/s within `budget` $/h, the least $/h that carries `carried` req/s)."""
    out = {}
    for name, design in DESIGNS.items():
        mine = [m for m in measured if design_of(m.deployment) == design and m.capacity is not None]
        within = [m.capacity or 0.0 for m in mine if (m.deployment.cost_per_h(PRICES) or 0) <= budget + 1e-9]
        able = [m.deployment.cost_per_h(PRICES) or 0.0 for m in mine if (m.capacity or 0) >= carried]
        out[name] = (max(within, default=0.0), min(able, default=None))
    return out


def measure(base: SimulatorConfig, reqs: PlanRequests, slos: Slos, most_cost: float, workers: int,
            baseline_scheduler: str) -> list[Sized]:
    """Each design searched on its own (the fast search's pruning holds within a design's own deployments), every
    deployment of it up to `most_cost` $/h; the baselines on `baseline_scheduler`."""
    found: list[Sized] = []
    for design in DESIGNS.values():
        mine = [d for d in candidates(8) if design_of(d) == design and (d.cost_per_h(PRICES) or 0) <= most_cost + 1e-9]
        servers = base.on_scheduler(baseline_scheduler) if design[0] is None else base
        found += search(servers, mine, reqs, slos, prices=PRICES, workers=workers)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400, help="requests a trial at least")
    parser.add_argument("--baseline", type=int, default=2, help="Baseline-H100 machines the budget is set by")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline-scheduler", choices=["0.33", "0.4"], default="0.33",
                        help="the baselines' vLLM scheduler: today's, or 0.4's before chunked prefill (the paper's "
                             "baseline); split designs run today's (their decode servers run no prompts)")
    parser.add_argument("--first-token", choices=["decode", "prefill"], default="prefill",
                        help="which machine's token is the client's first: Splitwise's prompt machine sends it (its "
                             "design); vLLM's proxy discards it and the decode server sends its own")
    args = parser.parse_args()
    load_presets(ROOT / "bench" / "data" / "splitwise-presets.yaml")
    slos = Slos(1.0, 0.05, 0.9)
    for trace in ("conv", "code"):
        scenario = parse_scenario({
            "name": f"splitwise-{trace}", "seed": 1,
            "simulator": {"model": "llama-2-70b", "accelerator": "h100-sxm", "tp": 8, "kv_transfer": "layerwise",
                          "first_token": args.first_token},
            "phases": [{"name": "p", "load": {"type": "trace",
                                              "file": str(ROOT / "scenarios" / "traces"
                                                          / f"AzureLLMInferenceTrace_{trace}.csv.gz")}}]}, "bench")
        reqs = plan_requests(scenario, args.requests)
        began = time.perf_counter()
        baseline = Deployment(machines(H100, args.baseline))
        budget = baseline.cost_per_h(PRICES) or 0.0
        measured = measure(scenario.simulator, reqs, slos, 2 * budget, args.workers, args.baseline_scheduler)
        carried = next(m.capacity or 0.0 for m in measured if m.deployment == baseline)
        print(f"\n{trace}: {len(measured)} deployments in {time.perf_counter() - began:.0f} s "
              f"({sum(m.capacity is not None for m in measured)} simulated, {sum(m.trials for m in measured)} trials); "
              f"prompts mean {reqs.mean_prompt:,.0f}, answers mean {reqs.mean_output:,.0f} tokens; {args.baseline} "
              f"Baseline-H100 machines: ${budget:g}/h, {carried:.2f} req/s")
        print(f"  {'design':<16} {'req/s within $' + format(budget, 'g') + '/h':>22} {'× Baseline-H100':>16} "
              f"{'$/h to carry it':>16} {'× Baseline-H100':>16}")
        for name, (most, cost) in per_design(measured, budget, carried).items():
            print(f"  {name:<16} {most:>22.2f} {most / carried if carried else 0:>16.2f} "
                  f"{'—' if cost is None else format(cost, 'g'):>16} "
                  f"{'—' if cost is None else format(cost / budget, '.2f'):>16}")


if __name__ == "__main__":
    main()
