"""Number formats for a model's weights: what each stores a weight in, and which tensor cores run its matmuls.

A format changes the balance the seed is about. Its bytes per weight set what a decode step reads (the
memory-bound side); the cores its matmuls run on set what a prompt costs (the compute-bound side). Weights in
a format the device has cores for multiply there (fp8 and int8 W8A8 on Hopper, FP4 on Blackwell); a format
without its cores on the device is dequantised to bf16 inside the matmul (W4A16 as AWQ and GPTQ run through
vLLM's Marlin kernels, fp8 on A100, MXFP4 on Hopper), at bf16's peak less the cost of unpacking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Weights = Literal["auto", "bf16", "fp8", "int8", "int4", "fp4"]
Cores = Literal["bf16", "fp8", "int8", "fp4"]
WEIGHTS: tuple[str, ...] = ("bf16", "fp8", "int8", "int4", "fp4")

# A dequantising matmul (W4A16 and the like) reaches this share of the bf16 kernels' efficiency at large
# batches: an assumption (Marlin's own benchmarks show it near bf16's at decode sizes, where the reads bound
# it anyway).
DEQUANTISED = 0.85


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    bits: float  # a weight's storage, its share of the scales included
    cores: Cores  # whose tensor cores its matmuls want
    # the matmuls' efficiency on those cores, as a share of bf16 kernels' on theirs: fp8's 0.50 against bf16's
    # 0.62 (the design brief's); int8's and FP4's assumed the same as fp8's
    compute: float


LOW_PRECISION = 0.50 / 0.62
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("bf16", 16, "bf16", 1.0),
    # fp8 W8A8 (vLLM's --quantization fp8, DeepSeek-V3's block-wise checkpoint): scales per channel or per
    # 128 × 128 block, a negligible share
    Format("fp8", 8, "fp8", LOW_PRECISION),
    Format("int8", 8, "int8", LOW_PRECISION),  # int8 W8A8 (SmoothQuant-style, compressed-tensors)
    # int4 W4A16 (AWQ, GPTQ): a 16-bit scale per group of 128 weights, dequantised on bf16 cores
    Format("int4", 4 + 16 / 128, "bf16", DEQUANTISED),
    # FP4: MXFP4 as gpt-oss ships it (an 8-bit scale per 32 weights; NVFP4's 8-bit scale per 16 is 4.5 bits)
    Format("fp4", 4 + 8 / 32, "fp4", LOW_PRECISION),
)}


def weight_format(name: str) -> Format:
    """The format of a name in WEIGHTS; ValueError naming the known ones."""
    if name not in FORMATS:
        raise ValueError(f"unknown weight format {name!r}; known: {', '.join(WEIGHTS)}")
    return FORMATS[name]
