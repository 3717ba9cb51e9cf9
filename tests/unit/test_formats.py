"""Number formats (issue 63): a format moves the roofline the way its bytes and its cores say — a decode reads fewer
bytes, a prompt runs on the format's tensor cores where the device has them and on bf16's, dequantised, where not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import build_model, catalogue
from harness.devices.formats import DEQUANTISED, WEIGHTS, weight_format
from harness.devices.roofline import RooflineModel
from harness.devices.step import StepLoad

LLAMA = "llama-3.1-8b"
HEAD = 128256 * 4096 * 2  # Llama-3.1-8B's LM head in bf16, in every format
DECODE = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
PROMPT = StepLoad(tokens=8192, seqs=1, prefill_attn=8192 * 4096)


def linear_bytes(weights: str) -> float:
    """The bytes a one-token step reads of the linear layers' weights (the LM head aside)."""
    spec = catalogue().models[LLAMA]
    read, _ = spec.weight_bytes_read(1, weight_format(weights))
    return read - HEAD


@pytest.mark.parametrize(("weights", "share"), [("fp8", 8 / 16), ("int8", 8 / 16), ("int4", 4.125 / 16),
                                                 ("fp4", 4.25 / 16)])
def test_a_decode_reads_the_format_s_bytes_of_each_weight(weights: str, share: float) -> None:
    """int4 (W4A16, a 16-bit scale per 128 weights) reads 4.125 bits a weight: about a quarter of bf16's."""
    assert linear_bytes(weights) / linear_bytes("bf16") == pytest.approx(share, rel=1e-9)


def test_fewer_bytes_make_a_memory_bound_decode_faster_in_proportion() -> None:
    steps = {w: build_model("h100-sxm", "llama-3.1-70b", w, tp=4).step_cost(DECODE) for w in ("bf16", "int4")}
    assert steps["bf16"].memory_bound and steps["int4"].memory_bound
    saved = steps["bf16"].seconds - steps["int4"].seconds
    # The weight read, per rank at H100's 0.692 of its peak, falls by the bytes the format saves
    spec = catalogue().models["llama-3.1-70b"]
    bf16 = spec.weight_bytes_read(1, weight_format("bf16"))[0]
    fewer = bf16 - spec.weight_bytes_read(1, weight_format("int4"))[0]
    assert fewer == pytest.approx((bf16 - 128256 * 8192 * 2) * (1 - 4.125 / 16), rel=1e-9)  # the head aside
    assert saved == pytest.approx(fewer / 4 / (3.35e12 * 0.692), rel=0.02)


@pytest.mark.parametrize(("accelerator", "weights", "peak", "share"), [
    ("h100-sxm", "fp8", 1979e12, 0.50 / 0.62),  # fp8 W8A8 on Hopper's fp8 cores, at 0.50 against bf16's 0.62
    ("a100-80g", "int8", 624e12, 0.50 / 0.62),  # int8 W8A8 on A100's int8 cores
    ("b200", "fp4", 9000e12, 0.50 / 0.62),  # FP4 on Blackwell's FP4 cores
    # without the cores, dequantised to bf16 inside the matmul
    ("a100-80g", "fp8", 312e12, DEQUANTISED), ("h100-sxm", "fp4", 989e12, DEQUANTISED),
    ("h100-sxm", "int4", 989e12, DEQUANTISED), ("mi300x", "fp4", 1307e12, DEQUANTISED),
])
def test_a_prompt_runs_on_the_format_s_cores_where_the_device_has_them(accelerator: str, weights: str, peak: float,
                                                                       share: float) -> None:
    law = build_model(accelerator, LLAMA, weights)
    assert isinstance(law, RooflineModel) and law.matmul_flops == pytest.approx((peak, share))
    # An 8k-token prompt is compute-bound: faster than bf16 on the format's own cores, slower dequantised (its
    # attention and fixed costs stay bf16's, so by less than the matmuls' own ratio).
    bf16 = build_model(accelerator, LLAMA, "bf16").step_cost(PROMPT)
    fmt = law.step_cost(PROMPT)
    assert not bf16.memory_bound and not fmt.memory_bound
    ideal = catalogue().devices[accelerator].bf16_flops / (peak * share)  # type: ignore[operator]
    ratio = fmt.seconds / bf16.seconds
    assert (ideal <= ratio < 1) if ideal < 1 else (1 < ratio <= ideal)


def test_auto_is_the_checkpoint_s_format_and_a_format_unknown_is_refused_naming_the_field() -> None:
    assert SimulatorConfig(model="gpt-oss-120b").weights == "auto"
    assert catalogue().models["gpt-oss-120b"].format("auto").name == "fp4"
    assert catalogue().models[LLAMA].format("auto").name == "bf16"
    assert SimulatorConfig.model_validate({"dtype": "fp8"}).weights == "fp8"  # the field's earlier name
    with pytest.raises(ValidationError, match="weights"):
        SimulatorConfig.model_validate({"weights": "int3"})
    assert set(WEIGHTS) == {"bf16", "fp8", "int8", "int4", "fp4"}


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("llama-3.1-70b", 4)])
def test_fp8_s_throughput_gain_on_h100_lies_within_vllm_s_published_up_to_1_6x(model: str, tp: int) -> None:
    """vLLM's FP8 W8A8 page (docs.vllm.ai, quantization/fp8, since 0.5.4): 'up to a 1.6x improvement in
    throughput'. A batch of 256 requests, 256 tokens in and out: fp8 gains, but no more than that."""
    from harness.config.scenario import parse_scenario
    from harness.tools.predict import predict

    tokens = {}
    for weights in ("bf16", "fp8"):
        scenario = parse_scenario({
            "name": "fp8", "seed": 1, "workload": {"prompt_tokens": 256, "output_tokens": 256},
            "simulator": {"accelerator": "h100-sxm", "model": model, "tp": tp, "weights": weights, "noise_sigma": 0},
            "phases": [{"name": "p", "load": {"type": "batch", "size": 256, "batches": 1}}]}, "test")
        tokens[weights] = predict(scenario).phases[0].throughput.output_tokens_per_s
    assert 1.2 < tokens["fp8"] / tokens["bf16"] <= 1.6
