"""Calibration of the roofline step model against the design brief's reference points (±20%)."""

import pytest

from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.perfmodel import RooflineModel, StepLoad
from harness.sim.presets import ACCELERATORS, MODELS
from harness.sim.virtual import run_virtual


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
