"""What every device's law shares: the work of one step as the scheduler sees it, what the step costs, the
budget vLLM's memory profile runs with, how a law is asked for, and the law's own protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

KV_DTYPE_BYTES = 2  # the KV cache stays bf16 whatever the weights, as vLLM does by default (kv_cache_dtype auto)
KvDtype = Literal["auto", "fp8"]


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
    # The roofline's parts of the step: reading weights and KV, the matmuls' and attention's arithmetic, the
    # tensor-parallel all-reduces (which of them binds a device, beside its KV capacity)
    memory_s: float = 0.0
    compute_s: float = 0.0
    link_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Budget:
    """What vLLM's memory profile runs its dummy forward pass with: a full token budget, a full batch."""

    tokens: int = 8192
    seqs: int = 1024


FULL = Budget()  # vLLM's defaults on a Hopper GPU


class PerformanceModel(Protocol):
    def step_cost(self, load: StepLoad) -> StepCost: ...

    def step_seconds(self, load: StepLoad) -> float: ...

    @property
    def peaks(self) -> tuple[float, float] | None:
        """(bytes/s, FLOP/s) the device's memory and arithmetic could do at most, all ranks; None: no
        roofline."""

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> int: ...

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> tuple[float, float]:
        """(weights, room for weights and KV cache), in bytes, all devices together."""
        ...



@dataclass(frozen=True, slots=True)
class Serving:
    """How a model is served on a device: what its law needs besides the two."""

    weights: str = "auto"  # a format of devices/formats.py, or "auto": the model's checkpoint's
    tp: int = 1  # devices the model is split over (tensor parallelism; an SRAM system's share of its layers)
    async_scheduling: bool = True
    kv_cache_dtype: KvDtype = "auto"
    graph_max: int = 0  # largest CUDA graph captured; 0: none (enforce_eager), no padding
    expert_parallel: bool = False
