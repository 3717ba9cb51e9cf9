"""The GPU's law: step time of one engine iteration on a roofline (design brief §5), in the terms of an era of
vLLM.

t_step = t_lin + t_attn + t_comm + t_cpu. The linear layers cost the larger of reading the weights and doing
the matmul FLOPs, blended by a root-sum-square (which fits measured profiles better than a hard max near the
ridge point); attention costs the larger of reading the KV cache and its FLOPs; tensor parallelism adds two
all-reduces per layer; the CPU adds a fixed and a per-sequence overhead. With async scheduling (vLLM's default
since 0.12) the host prepares the next step while the device runs this one, so only the part of the CPU time
that waits on the device stays on the step. The weights' number format sets the bytes a step reads and the
cores its matmuls run on.

KV capacity follows vLLM's memory profile: the memory the driver reports × gpu_memory_utilization, minus the
weights, the peak activations of a forward pass over a full token budget, and the runtime's own allocations.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.devices.formats import DEQUANTISED, Format
from harness.devices.models import ModelSpec
from harness.devices.step import FULL, Budget, KvDtype, StepCost, StepLoad, kv_bytes

if TYPE_CHECKING:
    from harness.devices.gpu import Accelerator

# An fp8 KV cache halves the bytes a token's keys and values take (twice the tokens in the same memory, half
# the bytes a decode reads); the attention kernels dequantise what they read: assumed to cost a tenth of
# attention's arithmetic efficiency (an assumption, not a measurement: vLLM publishes none).
FP8_KV_ATTN = 0.9


def graph_size(tokens: int, largest: int) -> int:
    """The CUDA graph a decode-only step of `tokens` sequences runs as: the smallest captured size holding it;
    a step beyond every captured size runs eagerly, unpadded."""
    sizes = captured_sizes(largest)
    at = bisect.bisect_left(sizes, tokens)
    return sizes[at] if tokens > 0 and at < len(sizes) else tokens


@functools.cache
def captured_sizes(largest: int) -> tuple[int, ...]:
    """vLLM's CUDA graph sizes up to `largest` (vllm/config/vllm.py): 1, 2, 4, every 8 below 256, then every
    16."""
    return tuple([n for n in (1, 2, 4) if n <= largest] + list(range(8, min(largest + 1, 256), 8))
                 + list(range(256, largest + 1, 16)))


def custom_allreduce(link: str, tp: int) -> bool:
    """Whether vLLM's custom all-reduce kernel serves `tp` GPUs on this link (custom_all_reduce.py): 2, 4, 6
    or 8 of them, fully connected (NVLink, xGMI) — over PCIe only a pair; otherwise NCCL's ring."""
    return tp in (2, 4, 6, 8) and (link in ("nvlink", "xgmi") or (link == "pcie" and tp == 2))


def slowest_rank_experts(experts: int, ranks: int, touched: float) -> float:
    """Expert parallelism: the expected experts the busiest of `ranks` ranks reads in a layer, each rank
    holding experts/ranks whole experts (the rounded-up share) and each expert touched with probability
    `touched`."""
    n = math.ceil(experts / ranks)
    cdf, below = 0.0, []
    for m in range(n):
        cdf += math.comb(n, m) * touched ** m * (1 - touched) ** (n - m)
        below.append(cdf)
    return sum(1 - c ** ranks for c in below)  # E[max] = Σ_m P(max > m)


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """The terms of today's vLLM (≥ 0.6), fitted on its own latency benchmark (docs/simulator.md, "Published
    points"); `VLLM_0_4` below holds the terms of the era before."""

    # The share of the memory's peak the dense layers' reads reach: None, each device's own (`eta_mem` of a
    # preset, fitted per device); a number: every device the same, as the design brief's 0.75.
    eta_mem: float | None = None
    eta_compute: float = 0.62  # bf16 matmuls; a format's own share of it (devices/formats.py)
    eta_attn: float = 0.5
    c0_s: float = 25e-6  # per-layer kernel-launch overhead, at the reference clock
    # Kernel latencies (c0, the all-reduce's α) were measured on Hopper; a device of a slower clock pays them
    # in proportion (A100 1,410 MHz against 1,980). None: no scaling, as the era before was fitted.
    clock_ref_mhz: float | None = 1980.0
    # Tensor-parallel all-reduce: the faster of vLLM's custom kernel — ~8 µs of latency, ~18% of the link's
    # peak as effective bandwidth: on H100 it measured 8.7 µs at 32 KB and 26.6 µs at 1 MB (tp 2), 9.2 / 40.2
    # µs (tp 4), 11.8 / 45.0 µs (tp 8) in sglang PR #2904 — and NCCL's ring for large (prefill) messages, 25
    # µs and the full link. Before issue 32 every all-reduce cost NCCL's, 2–3× the measured latency at decode
    # sizes.
    alpha_s: float = 8e-6
    # Fitted on H100 when every preset's link was 300 GB/s (0.18 of it, 54 GB/s effective); with H100's own
    # NVLink 4 figure, 450 GB/s, the same 54 GB/s: the measured kernel times above stay where they were.
    eta_link: float = 0.12
    alpha_ring_s: float = 25e-6
    # CPU time per step. Async scheduling hides the host's share (scheduling and preparing the next step's
    # inputs, per sequence mostly) under the device time; the rest (sampling, copying the sampled tokens back,
    # launch gaps) stays: 0.45 ms a step in today's vLLM (fitted with the devices' eta_mem; the design brief's
    # 1.25 ms is the era before).
    t0_s: float = 0.45e-3  # per step, not hidden
    t_host_s: float = 0.25e-3  # per step, hidden by async scheduling
    t_seq_s: float = 10e-6  # per running sequence, hidden by async scheduling
    # Every all-reduce a barrier where each rank waits for the slowest, growing with log2 of the ranks: 9 µs
    # in vLLM ≤ 0.4 (fitted on its tp 2–8 points); today's points fit it at zero.
    barrier_s: float = 0.0
    # The host's hand-over of each step's inputs to the ranks, per doubling of them: vLLM ≤ 0.4 broadcast them
    # with torch.distributed (0.9 ms); newer vLLM uses shared memory, and async scheduling hides host work.
    t_rank_s: float = 0.0
    # Experts' matmuls run at this share of eta_compute (fused-MoE kernels: few tokens per expert at a decode,
    # a grouped GEMM at a prefill — fitted on vLLM ≤ 0.4's MoE points, kept).
    moe_compute: float = 0.74
    # Experts' weights stream at this multiple of eta_mem (long contiguous reads of whole experts): 0.90 of
    # the peak against 0.75 in the era it was fitted in, kept as the ratio.
    expert_read: float = 1.2
    runtime_bytes: float = 1.0 * 2**30  # CUDA context, NCCL, cuBLAS workspaces, CUDA graph pools, per device


# vLLM 0.2–0.4 (and the design brief's worked check): every device at 0.75 of its memory's peak, 1.25 ms of
# host time a step, Python's per-sequence sampling and input preparation (67 µs a sequence) and each step's
# inputs broadcast to the ranks with torch.distributed (0.9 ms per doubling), a barrier at every all-reduce.
VLLM_0_4 = RooflineParams(eta_mem=0.75, clock_ref_mhz=None, t0_s=1.25e-3, t_seq_s=67e-6, barrier_s=9e-6,
                          t_rank_s=0.9e-3)
# An unfitted device's eta_mem: the mean of the fitted ones (A100, H100, H200).
DEFAULT_ETA_MEM = 0.66


@dataclass(frozen=True, slots=True)
class RooflineModel:
    accelerator: Accelerator
    model: ModelSpec
    weights: str = "bf16"  # a format of devices/formats.py
    tp: int = 1
    params: RooflineParams = RooflineParams()
    async_scheduling: bool = True
    kv_cache_dtype: KvDtype = "auto"
    graph_max: int = 0  # largest CUDA graph captured; 0: none (enforce_eager), no padding
    # vLLM's --enable-expert-parallel: each rank holds whole experts instead of a tp-th of every one. With one
    # engine (no data-parallel attention) every rank already has every token, so the experts' outputs are
    # summed by the same all-reduce tensor parallelism uses; the all-to-all vLLM's EP kernels do comes with
    # data-parallel attention, which the simulator does not model.
    expert_parallel: bool = False

    @property
    def format(self) -> Format:
        return self.model.format(self.weights)

    @property
    def matmul_flops(self) -> tuple[float, float]:
        """(peak FLOP/s, share of bf16's efficiency) the linear layers' matmuls run at: on the format's own
        cores where the device has them, else dequantised to bf16 inside the matmul."""
        fmt, a = self.format, self.accelerator
        native = a.peak(fmt.cores)
        return (native, fmt.compute) if native else (a.tflops * 1e12, DEQUANTISED)

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
        return a.bandwidth * self.tp, self.matmul_flops[0] * self.tp

    def step_seconds(self, load: StepLoad) -> float:
        return self.step_cost(load).seconds

    def step_cost(self, load: StepLoad) -> StepCost:
        m, a, p, tp = self.model, self.accelerator, self.params, self.tp
        eta = self.eta_mem
        bw = a.bandwidth * eta
        slower = p.clock_ref_mhz / a.clock_mhz if p.clock_ref_mhz else 1.0
        expert_eta = a.expert_eta_mem if a.expert_eta_mem is not None else min(1.0, eta * p.expert_read)
        flops, share = self.matmul_flops
        # A decode-only step runs as its CUDA graph: padded tokens read experts and do the linear layers'
        # maths
        tokens = graph_size(load.tokens, self.graph_max) if load.tokens == load.decodes else load.tokens
        weight_bytes, expert_bytes = m.weight_bytes_read(tokens, self.format)
        lin_flops = 2 * m.active_params * tokens
        expert_flops = 2 * m.top_k * m.expert_params * tokens
        t_mem = ((weight_bytes - expert_bytes) / tp / bw
                 + self._rank_expert_bytes(expert_bytes, tokens) / (a.bandwidth * expert_eta))
        t_flops = (lin_flops - expert_flops + expert_flops / p.moe_compute) / tp / (flops * p.eta_compute * share)
        t_lin = m.layers * p.c0_s * slower + math.hypot(t_mem, t_flops)
        kv_read = self.kv_bytes_per_token * (load.decode_context + load.prefill_cached)
        att_flops = m.attention_flops(load.decode_context, load.prefill_attn)
        eta_attn = p.eta_attn * (FP8_KV_ATTN if self.kv_cache_dtype == "fp8" else 1.0)
        t_kv, t_att = kv_read / m.kv_split(tp) / bw, att_flops / tp / (a.tflops * 1e12 * eta_attn)
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
        return StepCost(seconds, weight_bytes + kv_read, lin_flops + att_flops, t_mem + t_kv >= t_flops + t_att,
                        t_mem + t_kv, t_flops + t_att, t_comm)

    def _rank_expert_bytes(self, expert_bytes: float, tokens: int) -> float:
        """The expert weights the slowest rank reads: a tp-th of every touched expert, or with expert
        parallelism the whole of each touched expert it holds — at a small batch one rank's share of touched
        experts is often more than the mean."""
        m = self.model
        if not self.expert_parallel or self.tp == 1 or not expert_bytes:
            return expert_bytes / self.tp
        touched = 1 - (1 - m.top_k / m.experts) ** max(tokens, 1)
        each = expert_bytes / m.expert_params_read(tokens)  # an expert weight's bytes in the format
        return slowest_rank_experts(m.experts, self.tp, touched) * m.expert_params * each

    def activation_bytes(self, budget: Budget) -> float:
        """Peak activations of vLLM's profiling pass, per device: the MLP's widest tensors and a few
        hidden-size ones for every token of the budget, and the fp32 logits of a full batch for the
        sampler."""
        m = self.model
        per_token = (2 * m.mlp_width / self.tp + 4 * m.hidden) * 2
        return budget.tokens * per_token + budget.seqs * m.vocab * 4

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> tuple[float, float]:
        """The weights' bytes, and what vLLM's memory profile leaves for weights and KV cache on all TP ranks
        together: the memory the driver reports × utilisation, less the peak activations and the runtime's
        own."""
        per_device = (self.accelerator.reported_bytes * gpu_memory_utilization - self.params.runtime_bytes
                      - self.activation_bytes(budget))
        return self.model.weight_bytes(self.format), per_device * self.tp

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> int:
        """Tokens of KV cache that fit (all TP ranks together) in what the weights leave: a token's KV is
        split over `kv_split` of the ranks and held whole on each of the rest (replicated kv heads, MLA's
        latent)."""
        weights, room = self.memory(gpu_memory_utilization, budget)
        copies = self.tp / self.model.kv_split(self.tp)
        return max(0, int((room - weights) / (self.kv_bytes_per_token * copies)))
