"""Where the stress lands (issue 18): the engine's per-step MBU, MFU and bound against the roofline by hand."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import cast

import pytest

from harness.config.scenario import Hardware, parse_hardware
from harness.devices.catalogue import build_model, catalogue
from harness.devices.roofline import RooflineModel
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.stats.schema import PhaseStats
from harness.stats.server import Row
from harness.stats.stress import estimate, from_simulator, unestimated

# Llama-3.1-8B: 8.03 B parameters less the 128,256 × 4,096 embedding table, bf16; KV 2·32·8·128·2 B a token.
WEIGHT_BYTES = (8.03e9 - 128256 * 4096) * 2
LINEAR_FLOPS_PER_TOKEN = 2 * (8.03e9 - 128256 * 4096)
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2
ATTN_FLOPS_PER_UNIT = 4 * 32 * 32 * 128  # 4·L·n_q·d, per (query token × context token)

# (preset, HBM bytes/s, bf16 FLOP/s, the share of the memory's peak reached, the kernels' clock factor): H100's
# fitted share; MI300X unfitted (0.66, the fitted devices' mean), its 2,100 MHz clock shortening Hopper's latencies
PRESETS = [("h100-sxm", 3.35e12, 989e12, 0.692, 1.0), ("mi300x", 5.3e12, 1307e12, 0.66, 1980 / 2100)]


def by_hand_seconds(bw: float, peak: float, tokens: int, kv_bytes: float, attn_flops: float,
                    eta: float, clock: float) -> float:
    """The brief's step time in today's terms (η_c .62, η_att .5, c0 25 µs at Hopper's clock, t0 0.45 ms, the
    host's hidden share under the device time)."""
    t_mem, t_flops = WEIGHT_BYTES / (bw * eta), LINEAR_FLOPS_PER_TOKEN * tokens / (peak * 0.62)
    t_attn = max(kv_bytes / (bw * eta), attn_flops / (peak * 0.5))
    return 32 * 25e-6 * clock + (t_mem**2 + t_flops**2) ** 0.5 + t_attn + 0.45e-3


@pytest.mark.parametrize(("preset", "bw", "peak", "eta", "clock"), PRESETS)
def test_a_prefill_step_is_compute_bound_and_a_decode_step_memory_bound(preset: str, bw: float, peak: float,
                                                                         eta: float, clock: float) -> None:
    perf = build_model(preset, "llama-3.1-8b")
    assert isinstance(perf, RooflineModel)
    eng = Engine(perf, EngineConfig(kv_blocks=10_000, noise_sigma=0.0))
    eng.add(SimRequest("r", 1024, 2, 0))

    # Step 1: the whole 1,024-token prompt, nothing cached (Σ q·(p + q/2) = 1024 · 512).
    step = eng.schedule(0)
    eng.complete(step, step.duration_ns)
    attn = ATTN_FLOPS_PER_UNIT * 1024 * 512
    seconds = by_hand_seconds(bw, peak, 1024, 0.0, attn, eta, clock)
    assert step.duration_ns / 1e9 == pytest.approx(seconds, rel=1e-6)
    assert eng.stress.compute_bound_s == pytest.approx(seconds, rel=1e-6) and eng.stress.memory_bound_s == 0
    assert eng.stress.last_mfu == pytest.approx((LINEAR_FLOPS_PER_TOKEN * 1024 + attn) / (seconds * peak), rel=1e-6)
    assert eng.stress.last_mbu == pytest.approx(WEIGHT_BYTES / (seconds * bw), rel=1e-6)

    # Step 2: one decode at a context of 1,025 tokens.
    step = eng.schedule(step.duration_ns)
    eng.complete(step, step.duration_ns)
    kv = KV_PER_TOKEN * 1025
    seconds = by_hand_seconds(bw, peak, 1, kv, ATTN_FLOPS_PER_UNIT * 1025, eta, clock)
    assert eng.stress.memory_bound_s == pytest.approx(seconds, rel=1e-6)
    assert eng.stress.last_mbu == pytest.approx((WEIGHT_BYTES + kv) / (seconds * bw), rel=1e-6)
    assert eng.stress.last_mfu == pytest.approx(
        (LINEAR_FLOPS_PER_TOKEN + ATTN_FLOPS_PER_UNIT * 1025) / (seconds * peak), rel=1e-6)
    assert 0.4 < eng.stress.last_mbu < 0.75 and eng.stress.last_mfu < 0.01  # decoding: memory-bound, as it is


def test_tensor_parallel_peaks_are_the_ranks_together_and_an_asic_has_none() -> None:
    tp2 = RooflineModel(catalogue().devices["h100-sxm"], catalogue().models["llama-3.1-70b"], tp=2)  # type: ignore[arg-type]
    assert tp2.peaks == (2 * 3.35e12, 2 * 989e12)
    fp8 = build_model("h100-sxm", "llama-3.1-8b", "fp8")
    assert fp8.peaks == (3.35e12, 1979e12)
    asic = build_model("cerebras-cs3", "llama-3.1-8b")
    eng = Engine(asic, EngineConfig(kv_blocks=1000, noise_sigma=0.0))
    eng.add(SimRequest("r", 64, 2, 0))
    step = eng.schedule(0)
    eng.complete(step, step.duration_ns)
    assert asic.peaks is None and eng.stress.memory_bound_s == eng.stress.compute_bound_s == 0


def test_a_phase_stress_from_scraped_simulator_series() -> None:
    """Counters read as rates over the phase's window (between scrapes by interpolation), peaks as gauges."""
    def row(t_s: float, memory: float, compute: float) -> Row:
        return Row(int(t_s * 1e9), {"memory_bound_seconds_total": memory, "compute_bound_seconds_total": compute,
                                    "hbm_read_bytes_total": (memory + compute) * 1e12,
                                    "flops_total": (memory + compute) * 1e14,
                                    "peak_hbm_bytes_per_second": 2e12, "peak_flops_per_second": 1e15})
    # Over [10 s, 20 s]: 6 s of memory-bound and 2 s of compute-bound steps.
    rows = [row(0, 0, 0), row(10, 5, 1), row(20, 11, 3), row(30, 11, 3)]
    stress = from_simulator(rows, 10 * 10**9, 20 * 10**9)
    assert stress is not None and stress.source == "simulator"
    assert stress.memory_bound_share == pytest.approx(0.75) and stress.busy_share == pytest.approx(0.8)
    assert stress.mbu == pytest.approx(0.5) and stress.mfu == pytest.approx(0.1)
    assert from_simulator([Row(0, {"running": 1.0}), Row(10**9, {"running": 2.0})], 0, 10**9) is None  # a vLLM


def phase(itl_ms: float, ok: int, input_tokens: int, output_tokens: int, rps: float, e2e_ms: float) -> PhaseStats:
    """The few figures `estimate` reads, as a phase's statistics would hold them."""
    latency = SimpleNamespace(itl=SimpleNamespace(p50=itl_ms), e2e=SimpleNamespace(mean=e2e_ms))
    return cast(PhaseStats, SimpleNamespace(
        latency_ms=latency, requests=SimpleNamespace(ok=ok), throughput=SimpleNamespace(requests_per_s=rps),
        tokens=SimpleNamespace(input=input_tokens, output=output_tokens)))


def test_an_estimate_for_a_declared_accelerator_by_hand() -> None:
    # 16 running (scraped), contexts 1,000 + 200/2 = 1,100 tokens, one decode step per 10 ms ITL, on an H100.
    stats = phase(10.0, 100, 100_000, 20_000, 5.0, 2000.0)
    got = estimate(Hardware(accelerator="h100-sxm"), "llama-3.1-8b", stats, 16.0)
    read = WEIGHT_BYTES + KV_PER_TOKEN * 16 * 1100
    flops = (LINEAR_FLOPS_PER_TOKEN + ATTN_FLOPS_PER_UNIT * 1100) * 16
    assert got is not None and got.source == "estimate" and "16.0 requests running (scraped)" in got.basis
    assert got.mbu == pytest.approx(read / (0.010 * 3.35e12), rel=1e-9)
    assert got.mfu == pytest.approx(flops / (0.010 * 989e12), rel=1e-9)
    assert got.memory_bound_share == 1.0
    # Not scraped: Little's law from the client's records (5 req/s × 2 s in flight = 10).
    assert "10.0 requests running (Little's law)" in estimate(Hardware(accelerator="h100-sxm"), "llama-3.1-8b",
                                                              stats, None).basis  # type: ignore[union-attr]
    # Two H100s in fp8: twice the peaks, half the weight bytes but the LM head's (bf16 in every checkpoint).
    fp8 = estimate(Hardware(accelerator="h100-sxm", tp=2, dtype="fp8"), "llama-3.1-8b", stats, 16.0)
    head = 128256 * 4096 * 2
    assert fp8 is not None and fp8.mbu == pytest.approx(
        ((WEIGHT_BYTES - head) / 2 + head + KV_PER_TOKEN * 16 * 1100) / (0.010 * 2 * 3.35e12), rel=1e-9)
    # A custom model spec stands in for a preset; a model that is neither gives no estimate.
    custom = {"layers": 32, "hidden": 4096, "q_heads": 32, "kv_heads": 8, "head_dim": 128, "params_b": 8.03,
              "vocab": 128256}
    assert estimate(Hardware(accelerator="h100-sxm", model=custom), "served-name", stats, 16.0) == got.model_copy(
        update={"basis": got.basis.replace("llama-3.1-8b", "custom")})
    assert estimate(Hardware(accelerator="h100-sxm"), "my-finetune", stats, 16.0) is None
    # … and says why, with what to declare; nothing to say where there is an estimate.
    why = unestimated(Hardware(accelerator="h100-sxm"), "gemma-3-270m-q4", stats)
    assert why is not None and "serves 'gemma-3-270m-q4', which is no model preset" in why
    assert "--hardware h100-sxm,model=" in why
    assert unestimated(Hardware(accelerator="h100-sxm"), "llama-3.1-8b", stats) is None
    assert unestimated(Hardware(accelerator="h100-sxm", model=custom), "served-name", stats) is None
    assert "no roofline" in str(unestimated(Hardware(accelerator="cerebras-cs3"), "llama-3.1-8b", stats))
    assert "two tokens" in str(unestimated(Hardware(accelerator="h100-sxm"), "llama-3.1-8b",
                                           phase(0.0, 0, 0, 0, 0.0, 0.0)))


@pytest.mark.parametrize(("text", "problem"), [
    ("h900", "unknown accelerator 'h900'"), ("h100-sxm,tp=x", "tp: "), ("h100-sxm,gpus=2", "'gpus=2'"),
    ("h100-sxm,model=gpt-9", "unknown model 'gpt-9'"),
])
def test_the_hardware_flag_names_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_hardware(text)
    assert parse_hardware("h200,model=qwen2.5-7b,tp=2,dtype=fp8") == Hardware(
        accelerator="h200", model="qwen2.5-7b", tp=2, dtype="fp8")
