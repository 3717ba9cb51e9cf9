"""DistServe's comparisons on its own deployments, in virtual time (issue 66; docs/fleets.md, "Beside
DistServe"), as requests a second a GPU within its SLOs for 90% of requests (its artifact's
`evaluation/ae-scripts/e2e`: `_plot.py`, `2-start-api-server.py`):

- chatbot: OPT-13B on A100-80GB, vLLM on one GPU against prefill tp 2 + decode 1, TTFT 0.25 s and TPOT 0.1 s.
  Its workload, ShareGPT, does not ship here: the Azure 2023 conversation trace's lengths stand in (rows past
  OPT's 2,048 positions dropped, as DistServe drops ShareGPT's).
- code: OPT-66B, vLLM tp 4 against prefill tp 4 + decode tp 2 × pp 2, TTFT 0.125 s and TPOT 0.2 s, on its own
  workload: HumanEval's lengths (bench/data/humaneval-opt-lengths.csv). The simulator has no pipeline
  parallelism: the decode pool's 4 GPUs are run both ways it can be approximated — tp 4 (pp's memory per GPU,
  a faster step) and two tp 2 replicas (pp's step and throughput, half its KV room).

    python bench/distserve.py [--workload chatbot|code] [--requests 400] [--baseline-scheduler 0.4]
                              [--first-token prefill|decode]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.config.fleet import Pool
from harness.config.scenario import Scenario, parse_scenario
from harness.devices.catalogue import load_presets
from harness.plan.search import search
from harness.plan.space import Deployment
from harness.plan.trial import MOST_REQUESTS, PlanRequests, Slos, plan_requests

ROOT = Path(__file__).resolve().parents[1]
A100 = "a100-80g"


@dataclass(frozen=True)
class Workload:
    model: str
    slos: Slos
    baseline: tuple[str, Deployment]  # vLLM
    splits: dict[str, Deployment]  # DistServe's placement, as this simulator can run it


WORKLOADS = {
    "chatbot": Workload("opt-13b", Slos(0.25, 0.1, 0.9), ("vLLM (1 GPU)", Deployment(Pool(accelerator=A100))), {
        "DistServe (prefill tp 2 + decode 1: 3 GPUs)": Deployment(
            Pool(accelerator=A100), Pool(accelerator=A100, tp=2), "round_robin", "nvlink")}),
    "code": Workload("opt-66b", Slos(0.125, 0.2, 0.9), (
        "vLLM (tp 4: 4 GPUs)", Deployment(Pool(accelerator=A100, tp=4))), {
        "DistServe, decode pp 2 as tp 4 (8 GPUs)": Deployment(
            Pool(accelerator=A100, tp=4), Pool(accelerator=A100, tp=4), "round_robin", "nvlink"),
        "DistServe, decode pp 2 as 2 × tp 2 (8 GPUs)": Deployment(
            Pool(accelerator=A100, tp=2, replicas=2), Pool(accelerator=A100, tp=4), "least_outstanding", "nvlink")}),
}


def chatbot_requests(scenario: Scenario, fewest: int) -> PlanRequests:
    reqs = plan_requests(scenario, fewest)
    keep = reqs.prompts + reqs.outputs < 2048
    return PlanRequests(reqs.prompts[keep], reqs.outputs[keep], reqs.unit_offsets_s[: int(keep.sum())], fewest)


def humaneval_requests(seed: int, fewest: int) -> PlanRequests:
    """HumanEval's problems drawn at random as DistServe's client samples its ×10 copy (`random.sample`)."""
    rows = np.loadtxt(ROOT / "bench" / "data" / "humaneval-opt-lengths.csv", delimiter=",", comments="#",
                      skiprows=7, usecols=(1, 2), dtype=np.int64)
    rng = np.random.default_rng(seed)
    picked = rows[rng.integers(0, len(rows), MOST_REQUESTS)]
    return PlanRequests(picked[:, 0], picked[:, 1], np.cumsum(rng.exponential(1.0, MOST_REQUESTS)), fewest)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="chatbot")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--baseline-scheduler", choices=["0.33", "0.4"], default="0.33",
                        help="vLLM's scheduler: today's, or 0.4's before chunked prefill (the paper's baseline); "
                             "DistServe's servers run today's (its decode server runs no prompts)")
    parser.add_argument("--first-token", choices=["decode", "prefill"], default="prefill",
                        help="which pool's token is the first the client sees: DistServe's prefill instance sends "
                             "it (its design); vLLM's proxy discards it and the decode server sends its own")
    args = parser.parse_args()
    load_presets(ROOT / "bench" / "data" / "distserve-presets.yaml")
    work = WORKLOADS[args.workload]
    scenario = parse_scenario({
        "name": f"distserve-{work.model}", "seed": 1,
        "simulator": {"model": work.model, "accelerator": A100, "kv_link": "nvlink"},
        "phases": [{"name": "p", "load": {"type": "trace", "file": str(
            ROOT / "scenarios" / "traces" / "AzureLLMInferenceTrace_conv.csv.gz")}}]}, "bench")
    reqs = (chatbot_requests(scenario, args.requests) if args.workload == "chatbot"
            else humaneval_requests(scenario.seed, args.requests))
    began = time.perf_counter()
    before = scenario.simulator.on_scheduler(args.baseline_scheduler)
    measured = [*search(before, [work.baseline[1]], reqs, work.slos, prices={}, fast=False, workers=1),
                *search(scenario.simulator.changed(first_token=args.first_token), list(work.splits.values()), reqs,
                        work.slos, prices={}, fast=False, workers=1)]
    print(f"{work.model}, {args.workload} (prompts mean {reqs.mean_prompt:,.0f}, answers mean "
          f"{reqs.mean_output:,.0f}), TTFT {work.slos.ttft_s} s and TPOT {work.slos.tpot_s} s for 90%: "
          f"{time.perf_counter() - began:.0f} s")
    per_gpu = {}
    for name, deployment in {work.baseline[0]: work.baseline[1], **work.splits}.items():
        capacity = next(m.capacity or 0.0 for m in measured if m.deployment == deployment)
        per_gpu[name] = capacity / deployment.devices
        print(f"  {name:<46} {capacity:6.2f} req/s, {per_gpu[name]:5.2f} a GPU")
    first = per_gpu[work.baseline[0]]
    for name in work.splits:
        print(f"  {name} / vLLM a GPU: {per_gpu[name] / first:.2f}×")


if __name__ == "__main__":
    main()
