"""A GPU, known by its datasheet (and one fitted share of its memory's peak): its law is the roofline
(devices/roofline.py), its engine vLLM's on a GPU (batch defaults, CUDA graphs, tensor parallelism)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.devices.formats import Cores
from harness.devices.models import ModelSpec
from harness.devices.roofline import RooflineModel, RooflineParams, custom_allreduce
from harness.devices.step import PerformanceModel, Serving


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str
    tflops: float  # dense bf16
    hbm_tbps: float
    memory_gb: float
    fp8_tflops: float | None = None  # dense fp8; None: no fp8 tensor cores (fp8 weights, bf16 maths)
    int8_tops: float | None = None  # dense int8; None: no int8 tensor cores
    fp4_tflops: float | None = None  # dense FP4; None: no FP4 tensor cores (FP4 weights dequantised to bf16)
    link_gbps: float = 300.0  # tensor-parallel interconnect, GB/s per direction
    link: str = "nvlink"  # its kind: nvlink, xgmi (both fully connected within a node), pcie, none
    reported_gib: float | None = None  # memory the driver reports, as vLLM's log shows it; None: memory_gb
    # Share of the memory's peak today's vLLM decode reads reach, fitted per device on vLLM's own latency
    # benchmark (docs/simulator.md, "Published points"); None: an unfitted device, DEFAULT_ETA_MEM.
    eta_mem: float | None = None
    # Boost clock: the per-layer and all-reduce kernel latencies, fitted on Hopper, scale with it.
    clock_mhz: float = 1980.0
    # Share of the memory's peak MoE expert reads reach; None: the era's ratio to eta_mem (docs/simulator.md).
    expert_eta_mem: float | None = None
    # vLLM's largest CUDA graph: twice the sequence cap, at most 512 — 1,024 on data-centre Blackwell (SM
    # 10.0)
    graph_cap: int = 512
    # vLLM's (max_num_seqs, max_num_batched_tokens) when not given; None: by the memory the driver reports
    # (`batch_defaults`). vLLM gives every A100 the small ones whatever its memory.
    vllm_defaults: tuple[int, int] | None = None
    board_w: float | None = None  # its datasheet's maximum (TDP), watts: what a fleet is ranked by per joule

    @property
    def reported_bytes(self) -> float:
        return self.reported_gib * 2**30 if self.reported_gib is not None else self.memory_gb * 1e9

    def peak(self, cores: Cores) -> float | None:
        """Dense FLOP/s (OP/s for int8) of the tensor cores `cores` names; None: the device has none."""
        tera = {"bf16": self.tflops, "fp8": self.fp8_tflops, "int8": self.int8_tops, "fp4": self.fp4_tflops}[cores]
        return tera * 1e12 if tera else None

    @property
    def bandwidth(self) -> float:
        return self.hbm_tbps * 1e12

    # What every device answers (devices/device.py)
    unit = "GPU"
    splits_heads = True  # tensor parallelism splits the attention heads: a tp must divide them
    request_s = 0.0
    kv_limit = None
    twin = None

    @property
    def bf16_flops(self) -> float:
        return self.tflops * 1e12

    def device_counts(self) -> tuple[int, ...]:
        return (1, 2, 4, 8)

    def batch_defaults(self) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) as vLLM 0.33 picks them when not given
        (`vllm/engine/arg_utils.py`, `get_batch_defaults`, OpenAI server), by the memory the driver reports:
        under 70 GiB 256 / 2,048; 160 GiB or more (B200, MI300X) 1,024 / 16,384; between (H100, H200) 1,024 /
        8,192."""
        if self.vllm_defaults is not None:
            return self.vllm_defaults
        if self.reported_bytes < 70 * 2**30:
            return 256, 2048
        return (1024, 16384) if self.reported_bytes >= 160 * 2**30 else (1024, 8192)

    def graph_largest(self, max_num_seqs: int) -> int:
        """vLLM's largest captured CUDA graph: twice the sequence cap, at most the device's."""
        return min(2 * max_num_seqs, self.graph_cap)

    def link_text(self, tp: int) -> str:
        return f"{self.link} {self.link_gbps:g} GB/s"

    def allreduce(self, tp: int) -> str:
        """Which all-reduce vLLM runs at `tp` on this device's link."""
        if tp == 1:
            return "-"
        return "custom" if custom_allreduce(self.link, tp) else "NCCL"

    def law(self, model: ModelSpec, serving: Serving, params: RooflineParams | None = None) -> PerformanceModel:
        return RooflineModel(self, model, model.format(serving.weights).name, serving.tp,
                             params or RooflineParams(), serving.async_scheduling, serving.kv_cache_dtype,
                             serving.graph_max, serving.expert_parallel)
