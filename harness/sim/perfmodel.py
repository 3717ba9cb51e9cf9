"""Step time of one engine iteration (design brief §5).

`RooflineModel`: t_step = t_lin + t_attn + t_comm + t_cpu. The linear layers cost the larger of
reading the weights and doing the matmul FLOPs, blended by a root-sum-square (which fits measured
profiles better than a hard max near the ridge point); attention costs the larger of reading the
KV cache and its FLOPs; tensor parallelism adds two all-reduces per layer; the CPU adds a fixed
and a per-sequence overhead. `AsicModel` is the SRAM chip's measured per-token latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from harness.config.presets import ACCELERATORS, MODELS, Accelerator, AsicAccelerator, ModelSpec

Dtype = Literal["bf16", "fp8"]
KV_DTYPE_BYTES = 2  # the KV cache stays bf16 for both weight types, as vLLM does by default


@dataclass(slots=True)
class StepLoad:
    """The work of one step, as the scheduler sees it."""

    tokens: int = 0  # T: tokens processed (decodes + prefill chunk tokens)
    seqs: int = 0
    decodes: int = 0  # sequences generating one token this step
    decode_context: int = 0  # Σ context lengths of decoding requests
    prefill_cached: int = 0  # Σ already-computed prefix p of each prefill chunk
    prefill_attn: float = 0.0  # Σ q·(p + q/2) over prefill chunks of q tokens


class PerformanceModel(Protocol):
    def step_seconds(self, load: StepLoad) -> float: ...

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9) -> int: ...


@dataclass(frozen=True, slots=True)
class RooflineParams:
    eta_mem: float = 0.75
    eta_compute: float = 0.62  # bf16; 0.50 for fp8
    eta_attn: float = 0.5
    c0_s: float = 25e-6  # per-layer kernel-launch overhead
    alpha_s: float = 25e-6  # all-reduce latency
    t0_s: float = 1.5e-3  # scheduler/CPU time per step
    t_seq_s: float = 10e-6  # per running sequence


FP8_PARAMS = RooflineParams(eta_compute=0.50)


@dataclass(frozen=True, slots=True)
class RooflineModel:
    accelerator: Accelerator
    model: ModelSpec
    dtype: Dtype = "bf16"
    tp: int = 1
    params: RooflineParams = RooflineParams()

    @property
    def weight_bytes_per_param(self) -> int:
        return 1 if self.dtype == "fp8" else 2

    @property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_bytes_per_token(KV_DTYPE_BYTES)

    def step_seconds(self, load: StepLoad) -> float:
        m, a, p, tp = self.model, self.accelerator, self.params, self.tp
        bw = a.bandwidth * p.eta_mem
        flops = a.flops(self.dtype == "fp8")
        t_mem = m.weight_params_read(load.tokens) * self.weight_bytes_per_param / tp / bw
        t_flops = 2 * m.active_params * load.tokens / tp / (flops * p.eta_compute)
        t_lin = m.layers * p.c0_s + math.hypot(t_mem, t_flops)
        kv_read = self.kv_bytes_per_token * (load.decode_context + load.prefill_cached)
        att_flops = 4 * m.layers * m.q_heads * m.head_dim * (load.decode_context + load.prefill_attn)
        t_attn = max(kv_read / tp / bw, att_flops / tp / (a.flops(False) * p.eta_attn))
        t_comm = 0.0
        if tp > 1:
            ring = 2 * (tp - 1) / tp * load.tokens * m.hidden * 2 / (a.link_gbps * 1e9)
            t_comm = 2 * m.layers * (p.alpha_s + ring)
        t_cpu = p.t0_s + p.t_seq_s * load.seqs
        return t_lin + t_attn + t_comm + t_cpu

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9) -> int:
        """Tokens of KV cache that fit in the memory left after the weights (all TP ranks together)."""
        weights = self.model.params_b * 1e9 * self.weight_bytes_per_param
        free = self.accelerator.memory_gb * 1e9 * gpu_memory_utilization * self.tp - weights
        return max(0, int(free / self.kv_bytes_per_token))


@dataclass(frozen=True, slots=True)
class AsicModel:
    accelerator: AsicAccelerator
    model: ModelSpec

    def step_seconds(self, load: StepLoad) -> float:
        a = self.accelerator
        active_b = self.model.active_params / 1e9
        decode = a.decode_ms_per_b_params * active_b / 1e3 * (1 + a.growth_per_seq * max(load.seqs - 1, 0))
        prefill_rate = a.prefill_tokens_per_s_8b * 8 / active_b
        return decode + (load.tokens - load.decodes) / prefill_rate

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9) -> int:
        free = self.accelerator.memory_gb * 1e9 * gpu_memory_utilization
        return int(free / self.model.kv_bytes_per_token(KV_DTYPE_BYTES))


def build_model(accelerator: str, model: str, dtype: Dtype = "bf16", tp: int = 1) -> PerformanceModel:
    acc, spec = ACCELERATORS[accelerator], MODELS[model]
    if isinstance(acc, AsicAccelerator):
        return AsicModel(acc, spec)
    return RooflineModel(acc, spec, dtype, tp, FP8_PARAMS if dtype == "fp8" else RooflineParams())
