"""An SRAM-based inference system (a wafer, or chips with their weights on die), known by what its maker
reports rather than by a roofline: its law is a measured per-token latency that barely grows with the
batch."""

from __future__ import annotations

from dataclasses import dataclass

from harness.devices.models import ModelSpec
from harness.devices.step import FULL, Budget, KvDtype, PerformanceModel, Serving, StepCost, StepLoad, kv_bytes


@dataclass(frozen=True, slots=True)
class AsicAccelerator:
    """An SRAM-based inference system, described by what its maker reports rather than by a roofline.

    One *device* is what is bought and priced as one (a system: `chips` chips and `memory_gb` of on-chip
    memory between them); a model takes as many devices as its weights fill, and what they leave holds the KV
    cache. Weights stay on chip, so a decode step costs about the same whatever the batch: a per-token latency
    (`decode_ms` plus `decode_ms_per_b_params` per billion active parameters) growing slightly per sequence.
    """

    name: str
    decode_ms_per_b_params: float  # decode step latency at batch 1, per billion active parameters …
    growth_per_seq: float  # relative step-time growth per extra running sequence
    prefill_tokens_per_s_8b: float  # prefill throughput for an 8B-active-parameter model
    memory_gb: float  # on-chip memory of one device, weights and KV cache together
    decode_ms: float = 0.0  # … plus this, whatever the model
    chips: int = 1  # chips in one device
    device: str = "system"  # what one device is, for the tables
    board_w: float | None = None  # one device's rated power, watts

    # What every device answers (devices/device.py)
    splits_heads = False  # each system holds a share of the layers: any count of them
    request_s = 0.0
    kv_limit = None
    twin = None
    bf16_flops = None  # no roofline

    @property
    def unit(self) -> str:
        return self.device

    def device_counts(self) -> tuple[int, ...]:
        return tuple(range(1, 9))

    def batch_defaults(self) -> tuple[int, int]:
        return 1024, 8192  # not vLLM's: the middle of its table

    def graph_largest(self, max_num_seqs: int) -> int:
        return 0  # no CUDA graphs: no padding

    def link_text(self, tp: int) -> str:
        return "-"

    def allreduce(self, tp: int) -> str:
        return "-"

    def law(self, model: ModelSpec, serving: Serving) -> PerformanceModel:
        return AsicModel(self, model, model.format(serving.weights).name, serving.tp, serving.kv_cache_dtype)


@dataclass(frozen=True, slots=True)
class AsicModel:
    accelerator: AsicAccelerator
    model: ModelSpec
    weights: str = "bf16"  # a format of devices/formats.py
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
        return self.model.weight_bytes(self.model.format(self.weights))

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> tuple[float, float]:
        """The weights' bytes, and the devices' memory for weights and KV cache together."""
        return self.weight_bytes, self.devices * self.accelerator.memory_gb * 1e9 * gpu_memory_utilization

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> int:
        """What the devices' memory leaves once the weights are in it (none: the weights do not fit)."""
        weights, room = self.memory(gpu_memory_utilization, budget)
        return max(0, int((room - weights) / self.model.kv_bytes_per_token(kv_bytes(self.kv_cache_dtype))))
