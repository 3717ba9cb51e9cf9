"""Accelerator and model presets for the performance model (design brief §5)."""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True, slots=True)
class Accelerator:
    name: str
    tflops: float  # dense bf16
    hbm_tbps: float
    memory_gb: float
    link_gbps: float = 300.0  # tensor-parallel interconnect, per direction

    @property
    def flops(self) -> float:
        return self.tflops * 1e12

    @property
    def bandwidth(self) -> float:
        return self.hbm_tbps * 1e12


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    params_b: float  # all parameters, embedding included
    vocab: int
    active_params_b: float | None = None  # mixture-of-experts: parameters one token touches
    max_model_len: int = 131072

    @property
    def weight_params(self) -> float:
        """Parameters read per step by one token: active, LM head included, embedding table not."""
        active = self.active_params_b if self.active_params_b is not None else self.params_b
        return active * 1e9 - self.vocab * self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("a100-80g", 312, 2.039, 80),
        Accelerator("h100-sxm", 989, 3.35, 80),
        Accelerator("h200", 989, 4.8, 141),
        Accelerator("b200", 2250, 8.0, 180),
        Accelerator("mi300x", 1307, 5.3, 192),
    )
}

MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 8.03, 128256),
        ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 70.6, 128256),
        ModelSpec("qwen2.5-7b", 28, 3584, 28, 4, 128, 7.62, 152064, max_model_len=32768),
        ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 128, 46.7, 32000, active_params_b=12.9,
                  max_model_len=32768),
    )
}
