"""Calibration of the roofline step model against the design brief's reference points (±20%)."""

import pytest

from harness.config.presets import ACCELERATORS, MODELS, load_presets
from harness.errors import PresetError
from harness.sim.cli import preset_rows
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.perfmodel import RooflineModel, StepLoad, build_model
from tests.virtual_engine import run_virtual


def model(acc: str = "h100-sxm") -> RooflineModel:
    return RooflineModel(ACCELERATORS[acc], MODELS["llama-3.1-8b"])  # type: ignore[arg-type]


def test_worked_check_single_decode_at_1k_context() -> None:
    # Design brief: t_m 5.97 + L·c0 0.80 + t_attn 0.05 + t_cpu 1.51 ≈ 8.3 ms.
    t = model().step_seconds(StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024))
    assert t * 1e3 == pytest.approx(8.3, abs=0.1)


def test_itl_at_batch_64_near_12_5_ms() -> None:
    t = model().step_seconds(StepLoad(tokens=64, seqs=64, decodes=64, decode_context=64 * 1024))
    assert t * 1e3 == pytest.approx(12.5, rel=0.2)


def test_decode_is_memory_bound_prefill_compute_bound() -> None:
    m = model()
    one = m.step_seconds(StepLoad(tokens=1, seqs=1))
    eight = m.step_seconds(StepLoad(tokens=8, seqs=8))
    assert eight / one < 1.05  # more decodes barely cost more: the weights are read once
    prefill_2k = m.step_seconds(StepLoad(tokens=2048, seqs=1, prefill_attn=2048 * 1024))
    prefill_4k = m.step_seconds(StepLoad(tokens=4096, seqs=1, prefill_attn=4096 * 2048))
    assert prefill_4k / prefill_2k > 1.8  # prefill scales with tokens


def _virtual(acc: str, n: int, prompt: int, out: int) -> list[SimRequest]:
    m = model(acc)
    eng = Engine(m, EngineConfig(kv_blocks=m.kv_capacity_tokens() // 16, noise_sigma=0.0))
    reqs = [SimRequest(str(i), prompt, out, 0) for i in range(n)]
    run_virtual(eng, reqs)
    return reqs


def test_ttft_for_1k_prompt_near_30_ms() -> None:
    (req,) = _virtual("h100-sxm", 1, 1024, 2)
    assert req.token_ns[0] / 1e6 == pytest.approx(30, rel=0.2)


@pytest.mark.parametrize(("acc", "expected_ms"), [("h200", 833), ("a100-80g", 1579)])
def test_vllm_ci_latency_batch_8_in_32_out_128(acc: str, expected_ms: float) -> None:
    reqs = _virtual(acc, 8, 32, 128)
    assert max(r.token_ns[-1] for r in reqs) / 1e6 == pytest.approx(expected_ms, rel=0.2)


def test_tensor_parallel_splits_weight_reads() -> None:
    tp1 = RooflineModel(ACCELERATORS["h100-sxm"], MODELS["llama-3.1-70b"], tp=1)  # type: ignore[arg-type]
    tp4 = RooflineModel(ACCELERATORS["h100-sxm"], MODELS["llama-3.1-70b"], tp=4)  # type: ignore[arg-type]
    load = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
    assert tp4.step_seconds(load) < tp1.step_seconds(load) / 2.5


def test_kv_capacity_from_memory_left_after_weights() -> None:
    # 80 GB × 0.9 − 16.06 GB of weights, at 128 KiB of KV per token.
    assert model().kv_capacity_tokens() == pytest.approx((72e9 - 8.03e9 * 2) / 131072, rel=1e-6)


def test_mixture_of_experts_reads_more_experts_as_the_batch_grows() -> None:
    mixtral = MODELS["mixtral-8x7b"]
    one, many = mixtral.weight_params_read(1), mixtral.weight_params_read(256)
    assert one == pytest.approx(mixtral.active_params, rel=1e-9)  # top-2 of 8: exactly the active weights
    assert many == pytest.approx(46.7e9 - 32000 * 4096, rel=1e-3)  # every expert touched
    m = build_model("h100-sxm", "mixtral-8x7b", tp=2)
    itl_1 = m.step_seconds(StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024))
    itl_64 = m.step_seconds(StepLoad(tokens=64, seqs=64, decodes=64, decode_context=64 * 1024))
    assert itl_64 / itl_1 > 2  # a dense 8B model grows only 1.5× over the same range


def test_fp8_weights_halve_the_weight_read() -> None:
    load = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
    bf16 = build_model("h100-sxm", "llama-3.1-8b", "bf16").step_seconds(load)
    fp8 = build_model("h100-sxm", "llama-3.1-8b", "fp8").step_seconds(load)
    # t_m 5.97 → 2.99 ms; the other 2.4 ms (launch, CPU, attention) do not change.
    assert bf16 - fp8 == pytest.approx(2.98e-3, rel=0.05)


def test_sram_asic_latency_barely_grows_with_batch() -> None:
    asic = build_model("sram-asic", "llama-3.1-8b")
    itl_1 = asic.step_seconds(StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024))
    itl_64 = asic.step_seconds(StepLoad(tokens=64, seqs=64, decodes=64, decode_context=64 * 1024))
    assert itl_1 * 1e3 == pytest.approx(1.9, rel=0.1)
    assert itl_64 / itl_1 < 1.15


def test_custom_presets_from_yaml(tmp_path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("accelerators:\n  gpu-x: {tflops: 500, hbm_tbps: 1.675, memory_gb: 80}\n"
                    "models:\n  tiny: {layers: 32, hidden: 4096, q_heads: 32, kv_heads: 8, head_dim: 128,"
                    " params_b: 8.03, vocab: 128256}\n")
    load_presets(path)
    try:
        load = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
        # Half the H100's bandwidth: the weight read (5.97 ms) doubles.
        delta = build_model("gpu-x", "tiny").step_seconds(load) - build_model("h100-sxm", "tiny").step_seconds(load)
        assert delta == pytest.approx(6.0e-3, rel=0.05)
    finally:
        ACCELERATORS.pop("gpu-x")
        MODELS.pop("tiny")


def test_custom_presets_bad_field_names_file_and_entry(tmp_path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("accelerators:\n  gpu-y: {tflops: 500, hbm: 2, memory_gb: 80}\n")
    with pytest.raises(PresetError, match=r"p.yaml: gpu-y.hbm: unknown field"):
        load_presets(path)
    assert "gpu-y" not in ACCELERATORS


def test_presets_listing_covers_every_pair() -> None:
    rows = preset_rows()
    assert len(rows) == len(ACCELERATORS) * len(MODELS)
    h100 = next(r for r in rows if r[:2] == ("h100-sxm", "llama-3.1-8b"))
    assert h100[2:5] == ("1", "8.3", "12.5")
