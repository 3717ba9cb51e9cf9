"""What a deployment could serve at most, from the performance model alone — no simulated run: the bound a
plan prunes with and its capacity search starts under.

A server prefills at best in full token-budget steps and decodes at best with as many sequences as its
KV cache and sequence cap hold. A colocated server must do both, so it serves no more than the faster
of the two alone allows (a step that mixes them can share the weights' read, so the sum of the two
times is not a bound); a disaggregated deployment no more than its slower pool.
"""

from __future__ import annotations

from harness.config.fleet import Pool
from harness.config.simulator import SimulatorConfig
from harness.devices.step import StepLoad
from harness.plan.space import Deployment
from harness.sim.build import fit_problem, perf_model
from harness.sim.deployment import prefill_server

# Step noise (lognormal, sigma 0.03 by default) can make a step a few percent shorter than its model
SLACK = 1.15


def starts(base: SimulatorConfig, accelerator: str, tp: int) -> bool:
    """Whether vLLM would start the scenario's model on one server of `tp` × `accelerator`."""
    return fit_problem(Deployment(Pool(accelerator=accelerator, tp=tp)).config(base)) is None


def prefill_rate(server: SimulatorConfig, prompt: float) -> float:
    """Prompts a second one server computes at most: as many as fill its token budget, a step."""
    perf = perf_model(server)[0]
    k = max(1, min(server.max_num_seqs, int(server.max_num_batched_tokens // max(prompt, 1.0))))
    step = perf.step_seconds(StepLoad(tokens=int(k * prompt), seqs=k, prefill_attn=k * prompt * prompt / 2))
    return k / step


def decode_rate(server: SimulatorConfig, prompt: float, output: float) -> float:
    """Answers a second one server finishes at most: its cache and cap full of sequences, every step."""
    perf, kv_tokens = perf_model(server)
    seqs = max(1, min(server.max_num_seqs, int(kv_tokens // max(prompt + output, 1.0))))
    step = perf.step_seconds(StepLoad(tokens=seqs, seqs=seqs, decodes=seqs,
                                      decode_context=int(seqs * (prompt + output / 2))))
    return seqs / (step * max(output, 1.0))


def bound(deployment: Deployment, base: SimulatorConfig, prompt: float, output: float) -> float:
    """Requests a second the deployment could serve at most (with `SLACK`)."""
    cfg = deployment.config(base)
    decode = deployment.decode.replicas * decode_rate(cfg, prompt, output)
    first = prefill_server(cfg)
    if first is None or deployment.prefill is None:
        return SLACK * min(deployment.decode.replicas * prefill_rate(cfg, prompt), decode)
    return SLACK * min(deployment.prefill.replicas * prefill_rate(first, prompt), decode)
