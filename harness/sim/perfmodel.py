"""Step time of one engine iteration (design brief §5).

`RooflineModel`: t_step = t_lin + t_attn + t_comm + t_cpu. The linear layers cost the larger of
reading the weights and doing the matmul FLOPs, blended by a root-sum-square (which fits measured
profiles better than a hard max near the ridge point); attention costs the larger of reading the
KV cache and its FLOPs; tensor parallelism adds two all-reduces per layer; the CPU adds a fixed
and a per-sequence overhead. With async scheduling (vLLM's default since 0.12) the host prepares the next step
while the device runs this one, so only the part of the CPU time that waits on the device stays on the step.
`AsicModel` is the SRAM chip's measured per-token latency.

KV capacity follows vLLM's memory profile: the memory the driver reports × gpu_memory_utilization, minus the
weights, the peak activations of a forward pass over a full token budget, and the runtime's own allocations.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import Literal, Protocol

from harness.config.fitted import FittedAccelerator
from harness.config.fitted_step import table_ms
from harness.config.presets import ACCELERATORS, MODELS, Accelerator, AsicAccelerator, ModelSpec

Dtype = Literal["bf16", "fp8"]
KV_DTYPE_BYTES = 2  # the KV cache stays bf16 for both weight types, as vLLM does by default (kv_cache_dtype auto)
KvDtype = Literal["auto", "fp8"]
# An fp8 KV cache halves the bytes a token's keys and values take (twice the tokens in the same memory, half the
# bytes a decode reads); the attention kernels dequantise what they read: assumed to cost a tenth of attention's
# arithmetic efficiency (an assumption, not a measurement: vLLM publishes none).
FP8_KV_ATTN = 0.9


def graph_size(tokens: int, largest: int) -> int:
    """The CUDA graph a decode-only step of `tokens` sequences runs as: the smallest captured size holding it; a
    step beyond every captured size runs eagerly, unpadded."""
    sizes = captured_sizes(largest)
    at = bisect.bisect_left(sizes, tokens)
    return sizes[at] if tokens > 0 and at < len(sizes) else tokens


@functools.cache
def captured_sizes(largest: int) -> tuple[int, ...]:
    """vLLM's CUDA graph sizes up to `largest` (vllm/config/vllm.py): 1, 2, 4, every 8 below 256, then every 16."""
    return tuple([n for n in (1, 2, 4) if n <= largest] + list(range(8, min(largest + 1, 256), 8))
                 + list(range(256, largest + 1, 16)))


def graph_largest(max_num_seqs: int, accelerator: str) -> int:
    """vLLM's largest captured size: twice the sequence cap, at most 512 (1,024 on a data-centre Blackwell)."""
    return min(2 * max_num_seqs, 1024 if accelerator.startswith("b200") else 512)


def custom_allreduce(link: str, tp: int) -> bool:
    """Whether vLLM's custom all-reduce kernel serves `tp` GPUs on this link (custom_all_reduce.py): 2, 4, 6 or 8
    of them, fully connected (NVLink, xGMI) — over PCIe only a pair; otherwise NCCL's ring."""
    return tp in (2, 4, 6, 8) and (link in ("nvlink", "xgmi") or (link == "pcie" and tp == 2))


def slowest_rank_experts(experts: int, ranks: int, touched: float) -> float:
    """Expert parallelism: the expected experts the busiest of `ranks` ranks reads in a layer, each rank holding
    experts/ranks whole experts (the rounded-up share) and each expert touched with probability `touched`."""
    n = math.ceil(experts / ranks)
    cdf, below = 0.0, []
    for m in range(n):
        cdf += math.comb(n, m) * touched ** m * (1 - touched) ** (n - m)
        below.append(cdf)
    return sum(1 - c ** ranks for c in below)  # E[max] = Σ_m P(max > m)


def kv_bytes(kv_cache_dtype: KvDtype) -> int:
    return 1 if kv_cache_dtype == "fp8" else KV_DTYPE_BYTES


@dataclass(slots=True)
class StepLoad:
    """The work of one step, as the scheduler sees it."""

    tokens: int = 0  # T: tokens processed (decodes + prefill chunk tokens)
    seqs: int = 0
    decodes: int = 0  # sequences generating one token this step
    decode_context: int = 0  # Σ context lengths of decoding requests
    prefill_cached: int = 0  # Σ already-computed prefix p of each prefill chunk
    prefill_attn: float = 0.0  # Σ q·(p + q/2) over prefill chunks of q tokens


@dataclass(frozen=True, slots=True)
class StepCost:
    """What one step costs and moves: its time, the bytes it reads from device memory and the FLOPs it does
    (all tensor-parallel ranks together), and whether its memory traffic or its arithmetic takes longer."""

    seconds: float
    hbm_bytes: float = 0.0
    flops: float = 0.0
    memory_bound: bool | None = None  # None: no roofline to say


@dataclass(frozen=True, slots=True)
class Budget:
    """What vLLM's memory profile runs its dummy forward pass with: a full token budget, a full batch."""

    tokens: int = 8192
    seqs: int = 1024


class PerformanceModel(Protocol):
    def step_cost(self, load: StepLoad) -> StepCost: ...

    def step_seconds(self, load: StepLoad) -> float: ...

    @property
    def peaks(self) -> tuple[float, float] | None:
        """(bytes/s, FLOP/s) the device's memory and arithmetic could do at most, all ranks; None: no roofline."""

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> int: ...

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> tuple[float, float]:
        """(weights, room for weights and KV cache), in bytes, all devices together."""
        ...


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """The terms of today's vLLM (≥ 0.6), fitted on its own latency benchmark (docs/simulator.md, "Published
    points"); `VLLM_0_4` below holds the terms of the era before."""

    # The share of the memory's peak the dense layers' reads reach: None, each device's own (`eta_mem` of a
    # preset, fitted per device); a number: every device the same, as the design brief's 0.75.
    eta_mem: float | None = None
    eta_compute: float = 0.62  # bf16; 0.50 for fp8
    eta_attn: float = 0.5
    c0_s: float = 25e-6  # per-layer kernel-launch overhead, at the reference clock
    # Kernel latencies (c0, the all-reduce's α) were measured on Hopper; a device of a slower clock pays them in
    # proportion (A100 1,410 MHz against 1,980). None: no scaling, as the era before was fitted.
    clock_ref_mhz: float | None = 1980.0
    # Tensor-parallel all-reduce: the faster of vLLM's custom kernel — ~8 µs of latency, ~18% of the link's peak
    # as effective bandwidth: on H100 it measured 8.7 µs at 32 KB and 26.6 µs at 1 MB (tp 2), 9.2 / 40.2 µs
    # (tp 4), 11.8 / 45.0 µs (tp 8) in sglang PR #2904 — and NCCL's ring for large (prefill) messages, 25 µs
    # and the full link. Before issue 32 every all-reduce cost NCCL's, 2–3× the measured latency at decode sizes.
    alpha_s: float = 8e-6
    # Fitted on H100 when every preset's link was 300 GB/s (0.18 of it, 54 GB/s effective); with H100's own NVLink
    # 4 figure, 450 GB/s, the same 54 GB/s: the measured kernel times above stay where they were.
    eta_link: float = 0.12
    alpha_ring_s: float = 25e-6
    # CPU time per step. Async scheduling hides the host's share (scheduling and preparing the next step's inputs,
    # per sequence mostly) under the device time; the rest (sampling, copying the sampled tokens back, launch
    # gaps) stays: 0.45 ms a step in today's vLLM (fitted with the devices' eta_mem; the design brief's 1.25 ms
    # is the era before).
    t0_s: float = 0.45e-3  # per step, not hidden
    t_host_s: float = 0.25e-3  # per step, hidden by async scheduling
    t_seq_s: float = 10e-6  # per running sequence, hidden by async scheduling
    # Every all-reduce a barrier where each rank waits for the slowest, growing with log2 of the ranks: 9 µs in
    # vLLM ≤ 0.4 (fitted on its tp 2–8 points); today's points fit it at zero.
    barrier_s: float = 0.0
    # The host's hand-over of each step's inputs to the ranks, per doubling of them: vLLM ≤ 0.4 broadcast them
    # with torch.distributed (0.9 ms); newer vLLM uses shared memory, and async scheduling hides host work.
    t_rank_s: float = 0.0
    # Experts' matmuls run at this share of eta_compute (fused-MoE kernels: few tokens per expert at a decode,
    # a grouped GEMM at a prefill — fitted on vLLM ≤ 0.4's MoE points, kept).
    moe_compute: float = 0.74
    # Experts' weights stream at this multiple of eta_mem (long contiguous reads of whole experts): 0.90 of the
    # peak against 0.75 in the era it was fitted in, kept as the ratio.
    expert_read: float = 1.2
    runtime_bytes: float = 1.0 * 2**30  # CUDA context, NCCL, cuBLAS workspaces, CUDA graph pools, per device


# vLLM 0.2–0.4 (and the design brief's worked check): every device at 0.75 of its memory's peak, 1.25 ms of host
# time a step, Python's per-sequence sampling and input preparation (67 µs a sequence) and each step's inputs
# broadcast to the ranks with torch.distributed (0.9 ms per doubling), a barrier at every all-reduce.
VLLM_0_4 = RooflineParams(eta_mem=0.75, clock_ref_mhz=None, t0_s=1.25e-3, t_seq_s=67e-6, barrier_s=9e-6,
                          t_rank_s=0.9e-3)
# An unfitted device's eta_mem: the mean of the fitted ones (A100, H100, H200).
DEFAULT_ETA_MEM = 0.66


FP8_PARAMS = RooflineParams(eta_compute=0.50)


@dataclass(frozen=True, slots=True)
class RooflineModel:
    accelerator: Accelerator
    model: ModelSpec
    dtype: Dtype = "bf16"
    tp: int = 1
    params: RooflineParams = RooflineParams()
    async_scheduling: bool = True
    kv_cache_dtype: KvDtype = "auto"
    graph_max: int = 0  # largest CUDA graph captured; 0: none (enforce_eager), no padding
    # vLLM's --enable-expert-parallel: each rank holds whole experts instead of a tp-th of every one. With one
    # engine (no data-parallel attention) every rank already has every token, so the experts' outputs are summed
    # by the same all-reduce tensor parallelism uses; the all-to-all vLLM's EP kernels do comes with data-parallel
    # attention, which the simulator does not model.
    expert_parallel: bool = False

    @property
    def weight_bytes_per_param(self) -> int:
        return 1 if self.dtype == "fp8" else 2

    @property
    def kv_bytes_per_token(self) -> float:
        return self.model.kv_bytes_per_token(kv_bytes(self.kv_cache_dtype))

    @property
    def eta_mem(self) -> float:
        """The share of the memory's peak the dense layers' reads reach: the era's, or the device's own."""
        if self.params.eta_mem is not None:
            return self.params.eta_mem
        return self.accelerator.eta_mem if self.accelerator.eta_mem is not None else DEFAULT_ETA_MEM

    @property
    def peaks(self) -> tuple[float, float]:
        a = self.accelerator
        return a.bandwidth * self.tp, a.flops(self.dtype == "fp8") * self.tp

    def step_seconds(self, load: StepLoad) -> float:
        return self.step_cost(load).seconds

    def step_cost(self, load: StepLoad) -> StepCost:
        m, a, p, tp = self.model, self.accelerator, self.params, self.tp
        eta = self.eta_mem
        bw = a.bandwidth * eta
        slower = p.clock_ref_mhz / a.clock_mhz if p.clock_ref_mhz else 1.0
        expert_eta = a.expert_eta_mem if a.expert_eta_mem is not None else min(1.0, eta * p.expert_read)
        flops = a.flops(self.dtype == "fp8")
        # A decode-only step runs as its CUDA graph: padded tokens read experts and do the linear layers' maths
        tokens = graph_size(load.tokens, self.graph_max) if load.tokens == load.decodes else load.tokens
        weight_bytes = m.weight_params_read(tokens) * self.weight_bytes_per_param
        expert_bytes = m.expert_params_read(tokens) * self.weight_bytes_per_param
        lin_flops = 2 * m.active_params * tokens
        expert_flops = 2 * m.top_k * m.expert_params * tokens
        t_mem = ((weight_bytes - expert_bytes) / tp / bw
                 + self._rank_expert_bytes(expert_bytes, tokens) / (a.bandwidth * expert_eta))
        t_flops = (lin_flops - expert_flops + expert_flops / p.moe_compute) / tp / (flops * p.eta_compute)
        t_lin = m.layers * p.c0_s * slower + math.hypot(t_mem, t_flops)
        kv_read = self.kv_bytes_per_token * (load.decode_context + load.prefill_cached)
        att_flops = 4 * m.layers * m.q_heads * m.head_dim * (load.decode_context + load.prefill_attn)
        eta_attn = p.eta_attn * (FP8_KV_ATTN if self.kv_cache_dtype == "fp8" else 1.0)
        t_kv, t_att = kv_read / tp / bw, att_flops / tp / (a.flops(False) * eta_attn)
        t_comm = 0.0
        if tp > 1:
            moved = 2 * (tp - 1) / tp * load.tokens * m.hidden * 2 / (a.link_gbps * 1e9)
            ring = p.alpha_ring_s + moved
            t_comm = 2 * m.layers * (min(p.alpha_s * slower + moved / p.eta_link, ring) if custom_allreduce(a.link, tp)
                                     else ring)
            t_comm += 2 * m.layers * p.barrier_s * math.log2(tp)
        device = t_lin + max(t_kv, t_att) + t_comm + p.t0_s
        host = p.t_host_s + p.t_seq_s * load.seqs + p.t_rank_s * math.log2(tp)
        seconds = max(device, host) if self.async_scheduling else device + host
        return StepCost(seconds, weight_bytes + kv_read, lin_flops + att_flops, t_mem + t_kv >= t_flops + t_att)

    def _rank_expert_bytes(self, expert_bytes: float, tokens: int) -> float:
        """The expert weights the slowest rank reads: a tp-th of every touched expert, or with expert parallelism
        the whole of each touched expert it holds — at a small batch one rank's share of touched experts is
        often more than the mean."""
        m = self.model
        if not self.expert_parallel or self.tp == 1 or not expert_bytes:
            return expert_bytes / self.tp
        touched = 1 - (1 - m.top_k / m.experts) ** max(tokens, 1)
        return slowest_rank_experts(m.experts, self.tp, touched) * m.expert_params * self.weight_bytes_per_param

    def activation_bytes(self, budget: Budget) -> float:
        """Peak activations of vLLM's profiling pass, per device: the MLP's widest tensors and a few hidden-size
        ones for every token of the budget, and the fp32 logits of a full batch for the sampler."""
        m = self.model
        per_token = (2 * m.mlp_width / self.tp + 4 * m.hidden) * 2
        return budget.tokens * per_token + budget.seqs * m.vocab * 4

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> tuple[float, float]:
        """The weights' bytes, and what vLLM's memory profile leaves for weights and KV cache on all TP ranks
        together: the memory the driver reports × utilisation, less the peak activations and the runtime's own."""
        per_device = (self.accelerator.reported_bytes * gpu_memory_utilization - self.params.runtime_bytes
                      - self.activation_bytes(budget))
        return self.model.params_b * 1e9 * self.weight_bytes_per_param, per_device * self.tp

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> int:
        """Tokens of KV cache that fit (all TP ranks together) in what the weights leave."""
        weights, room = self.memory(gpu_memory_utilization, budget)
        return max(0, int((room - weights) / self.kv_bytes_per_token))


@dataclass(frozen=True, slots=True)
class AsicModel:
    accelerator: AsicAccelerator
    model: ModelSpec
    dtype: Dtype = "bf16"
    devices: int = 1  # systems serving the model together (the simulator's `tp`)
    kv_cache_dtype: KvDtype = "auto"

    peaks = None  # weights in SRAM: no memory roofline to measure against

    def step_cost(self, load: StepLoad) -> StepCost:
        return StepCost(self.step_seconds(load))

    def step_seconds(self, load: StepLoad) -> float:
        a = self.accelerator
        active_b = self.model.active_params / 1e9
        decode = ((a.decode_ms + a.decode_ms_per_b_params * active_b) / 1e3
                  * (1 + a.growth_per_seq * max(load.seqs - 1, 0)))
        prefill_rate = a.prefill_tokens_per_s_8b * 8 / active_b
        return decode + (load.tokens - load.decodes) / prefill_rate

    @property
    def weight_bytes(self) -> float:
        return self.model.params_b * 1e9 * (1 if self.dtype == "fp8" else 2)

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> tuple[float, float]:
        """The weights' bytes, and the devices' memory for weights and KV cache together."""
        return self.weight_bytes, self.devices * self.accelerator.memory_gb * 1e9 * gpu_memory_utilization

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> int:
        """What the devices' memory leaves once the weights are in it (none: the weights do not fit)."""
        weights, room = self.memory(gpu_memory_utilization, budget)
        return max(0, int((room - weights) / self.model.kv_bytes_per_token(kv_bytes(self.kv_cache_dtype))))


@dataclass(frozen=True, slots=True)
class FittedModel:
    """A step-time model fitted to a measured endpoint (`harness sim fit`): linear in what a step does."""

    accelerator: FittedAccelerator
    peaks = None  # fitted to times, not to a device's limits

    def step_cost(self, load: StepLoad) -> StepCost:
        return StepCost(self.step_seconds(load))

    def step_seconds(self, load: StepLoad) -> float:
        a = self.accelerator
        if a.decode_ms:
            prompts = load.tokens - load.decodes
            # A first token held for this step leaves with the others' tokens at no cost of its own:
            # llama-server alone sends it ~7 ms after its prompt's step, with others one step later.
            prompt = (a.prompt_price.ms(prompts / 1e3, load.seqs - load.decodes, load.decodes,
                                        load.prefill_attn / 1e6) if prompts > 0 else 0.0)
            return (table_ms(a.decode_ms, a.per_seq_ms, load.decodes) + prompt
                    + a.per_context_ktoken_ms * load.decode_context / 1e3) / 1e3
        return (a.step_ms + a.per_seq_ms * load.seqs + a.per_context_ktoken_ms * load.decode_context / 1e3
                + (a.prompt_step_ms if load.prefill_attn > 0 else 0.0)
                + math.hypot(a.weights_ms, a.per_ktoken_ms * load.tokens / 1e3)) / 1e3

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> int:
        return self.accelerator.kv_tokens  # as measured, at the utilisation the endpoint ran with

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = Budget()) -> tuple[float, float]:
        return 0.0, math.inf  # a measured endpoint: it started, its weights fitted


def build_model(accelerator: str, model: str, dtype: Dtype = "bf16", tp: int = 1,
                async_scheduling: bool = True, kv_cache_dtype: KvDtype = "auto", graph_max: int = 0,
                expert_parallel: bool = False) -> PerformanceModel:
    acc, spec = ACCELERATORS[accelerator], MODELS[model]
    if isinstance(acc, AsicAccelerator):
        return AsicModel(acc, spec, dtype, tp, kv_cache_dtype)
    if isinstance(acc, FittedAccelerator):
        return FittedModel(acc)  # its KV capacity measured, whatever the cache's type
    return RooflineModel(acc, spec, dtype, tp, FP8_PARAMS if dtype == "fp8" else RooflineParams(), async_scheduling,
                         kv_cache_dtype, graph_max, expert_parallel)
