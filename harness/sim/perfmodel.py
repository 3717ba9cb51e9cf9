"""Step time of one engine iteration: the roofline model of the design brief (§5).

t_step = t_lin + t_attn + t_comm + t_cpu, where the linear layers cost the larger of reading
the weights and doing the matmul FLOPs (blended by a root-sum-square, which fits measured
profiles better than a hard max near the ridge point), attention costs the larger of reading
the KV cache and its FLOPs, tensor parallelism adds two all-reduces per layer, and the CPU
adds a fixed and a per-sequence overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from harness.sim.presets import Accelerator, ModelSpec


@dataclass(slots=True)
class StepLoad:
    """The work of one step, as the scheduler sees it."""

    tokens: int = 0  # T: tokens processed (decodes + prefill chunk tokens)
    seqs: int = 0
    decode_context: int = 0  # Σ context lengths of decoding requests
    prefill_cached: int = 0  # Σ already-computed prefix p of each prefill chunk
    prefill_attn: float = 0.0  # Σ q·(p + q/2) over prefill chunks of q tokens


class PerformanceModel(Protocol):
    def step_seconds(self, load: StepLoad) -> float: ...


@dataclass(frozen=True, slots=True)
class RooflineParams:
    eta_mem: float = 0.75
    eta_compute: float = 0.62  # bf16; 0.50 for fp8
    eta_attn: float = 0.5
    c0_s: float = 25e-6  # per-layer kernel-launch overhead
    alpha_s: float = 25e-6  # all-reduce latency
    t0_s: float = 1.5e-3  # scheduler/CPU time per step
    t_seq_s: float = 10e-6  # per running sequence


@dataclass(frozen=True, slots=True)
class RooflineModel:
    accelerator: Accelerator
    model: ModelSpec
    dtype_bytes: int = 2
    tp: int = 1
    params: RooflineParams = RooflineParams()

    @property
    def kv_bytes_per_token(self) -> int:
        return self.model.kv_bytes_per_token(self.dtype_bytes)

    def step_seconds(self, load: StepLoad) -> float:
        m, a, p, tp = self.model, self.accelerator, self.params, self.tp
        bw = a.bandwidth * p.eta_mem
        t_mem = m.weight_params * self.dtype_bytes / tp / bw
        t_flops = 2 * m.weight_params * load.tokens / tp / (a.flops * p.eta_compute)
        t_lin = m.layers * p.c0_s + math.hypot(t_mem, t_flops)
        kv_read = self.kv_bytes_per_token * (load.decode_context + load.prefill_cached)
        att_flops = 4 * m.layers * m.q_heads * m.head_dim * (load.decode_context + load.prefill_attn)
        t_attn = max(kv_read / tp / bw, att_flops / tp / (a.flops * p.eta_attn))
        t_comm = 0.0
        if tp > 1:
            ring = 2 * (tp - 1) / tp * load.tokens * m.hidden * 2 / (a.link_gbps * 1e9)
            t_comm = 2 * m.layers * (p.alpha_s + ring)
        t_cpu = p.t0_s + p.t_seq_s * load.seqs
        return t_lin + t_attn + t_comm + t_cpu

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9) -> int:
        """Tokens of KV cache that fit in the memory left after the weights."""
        weights = self.model.params_b * 1e9 * self.dtype_bytes / self.tp
        free = self.accelerator.memory_gb * 1e9 * gpu_memory_utilization - weights
        return max(0, int(free * self.tp / self.kv_bytes_per_token))
