"""DistServe's first comparison on its own deployments, in virtual time (issue 66; docs/fleets.md, "Beside
DistServe"): OPT-13B on A100-80GB, vLLM on one GPU against DistServe's prefill on two GPUs (tp 2) and decode on
one, within TTFT 0.25 s and TPOT 0.1 s for 90% of requests (its artifact's `evaluation/ae-scripts/e2e`), as
requests a second a GPU. Its workload, ShareGPT, does not ship here: the Azure 2023 conversation trace's lengths
stand in (rows past OPT's 2,048 positions dropped, as DistServe drops ShareGPT's).

    python bench/distserve.py [--requests 400] [--baseline-scheduler 0.4]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.config.fleet import Pool
from harness.config.scenario import parse_scenario
from harness.devices.catalogue import load_presets
from harness.plan.search import search
from harness.plan.space import Deployment
from harness.plan.trial import Slos, plan_requests

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--baseline-scheduler", choices=["0.33", "0.4"], default="0.33",
                        help="vLLM's scheduler: today's, or 0.4's before chunked prefill (the paper's baseline); "
                             "DistServe's servers run today's (its decode server runs no prompts)")
    args = parser.parse_args()
    load_presets(ROOT / "bench" / "data" / "distserve-presets.yaml")
    scenario = parse_scenario({
        "name": "distserve-opt-13b", "seed": 1,
        "simulator": {"model": "opt-13b", "accelerator": "a100-80g", "kv_link": "nvlink"},
        "phases": [{"name": "p", "load": {"type": "trace", "file": str(
            ROOT / "scenarios" / "traces" / "AzureLLMInferenceTrace_conv.csv.gz")}}]}, "bench")
    reqs = plan_requests(scenario, args.requests)
    keep = reqs.prompts + reqs.outputs < 2048
    reqs = type(reqs)(reqs.prompts[keep], reqs.outputs[keep], reqs.unit_offsets_s[: int(keep.sum())], args.requests)
    slos = Slos(0.25, 0.1, 0.9)
    designs = {"vLLM (1 GPU)": Deployment(Pool(accelerator="a100-80g")),
               "DistServe (prefill tp 2 + decode 1: 3 GPUs)": Deployment(
                   Pool(accelerator="a100-80g"), Pool(accelerator="a100-80g", tp=2), "round_robin", "nvlink")}
    began = time.perf_counter()
    vllm, split = designs.values()
    before = scenario.simulator.on_scheduler(args.baseline_scheduler)
    measured = [*search(before, [vllm], reqs, slos, prices={}, fast=False, workers=1),
                *search(scenario.simulator, [split], reqs, slos, prices={}, fast=False, workers=1)]
    print(f"OPT-13B, Azure conversation lengths (prompts mean {reqs.mean_prompt:,.0f}, answers mean "
          f"{reqs.mean_output:,.0f}), TTFT 0.25 s and TPOT 0.1 s for 90%: {time.perf_counter() - began:.0f} s")
    per_gpu = {}
    for name, deployment in designs.items():
        capacity = next(m.capacity or 0.0 for m in measured if m.deployment == deployment)
        per_gpu[name] = capacity / deployment.devices
        print(f"  {name:<46} {capacity:6.2f} req/s, {per_gpu[name]:5.2f} a GPU")
    first, second = per_gpu.values()
    print(f"  DistServe / vLLM a GPU: {second / first:.2f}×")


if __name__ == "__main__":
    main()
