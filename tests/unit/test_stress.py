"""Where the stress lands (issue 18): the engine's per-step MBU, MFU and bound against the roofline by hand."""

from __future__ import annotations

import pytest

from harness.config.presets import ACCELERATORS, MODELS
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.perfmodel import RooflineModel, build_model
from harness.stats.server import Row
from harness.stats.stress import from_simulator

# Llama-3.1-8B: 8.03 B parameters less the 128,256 × 4,096 embedding table, bf16; KV 2·32·8·128·2 B a token.
WEIGHT_BYTES = (8.03e9 - 128256 * 4096) * 2
LINEAR_FLOPS_PER_TOKEN = 2 * (8.03e9 - 128256 * 4096)
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2
ATTN_FLOPS_PER_UNIT = 4 * 32 * 32 * 128  # 4·L·n_q·d, per (query token × context token)

# (preset, HBM bytes/s, bf16 FLOP/s)
PRESETS = [("h100-sxm", 3.35e12, 989e12), ("mi300x", 5.3e12, 1307e12)]


def by_hand_seconds(bw: float, peak: float, tokens: int, kv_bytes: float, attn_flops: float) -> float:
    """The brief's step time with its defaults (η_m .75, η_c .62, η_att .5, c0 25 µs, t0 1.25 ms hidden host)."""
    t_mem, t_flops = WEIGHT_BYTES / (bw * 0.75), LINEAR_FLOPS_PER_TOKEN * tokens / (peak * 0.62)
    t_attn = max(kv_bytes / (bw * 0.75), attn_flops / (peak * 0.5))
    return 32 * 25e-6 + (t_mem**2 + t_flops**2) ** 0.5 + t_attn + 1.25e-3


@pytest.mark.parametrize(("preset", "bw", "peak"), PRESETS)
def test_a_prefill_step_is_compute_bound_and_a_decode_step_memory_bound(preset: str, bw: float, peak: float) -> None:
    perf = build_model(preset, "llama-3.1-8b")
    assert isinstance(perf, RooflineModel)
    eng = Engine(perf, EngineConfig(kv_blocks=10_000, noise_sigma=0.0))
    eng.add(SimRequest("r", 1024, 2, 0))

    # Step 1: the whole 1,024-token prompt, nothing cached (Σ q·(p + q/2) = 1024 · 512).
    step = eng.schedule(0)
    eng.complete(step, step.duration_ns)
    attn = ATTN_FLOPS_PER_UNIT * 1024 * 512
    seconds = by_hand_seconds(bw, peak, 1024, 0.0, attn)
    assert step.duration_ns / 1e9 == pytest.approx(seconds, rel=1e-6)
    assert eng.stress.compute_bound_s == pytest.approx(seconds, rel=1e-6) and eng.stress.memory_bound_s == 0
    assert eng.stress.last_mfu == pytest.approx((LINEAR_FLOPS_PER_TOKEN * 1024 + attn) / (seconds * peak), rel=1e-6)
    assert eng.stress.last_mbu == pytest.approx(WEIGHT_BYTES / (seconds * bw), rel=1e-6)

    # Step 2: one decode at a context of 1,025 tokens.
    step = eng.schedule(step.duration_ns)
    eng.complete(step, step.duration_ns)
    kv = KV_PER_TOKEN * 1025
    seconds = by_hand_seconds(bw, peak, 1, kv, ATTN_FLOPS_PER_UNIT * 1025)
    assert eng.stress.memory_bound_s == pytest.approx(seconds, rel=1e-6)
    assert eng.stress.last_mbu == pytest.approx((WEIGHT_BYTES + kv) / (seconds * bw), rel=1e-6)
    assert eng.stress.last_mfu == pytest.approx(
        (LINEAR_FLOPS_PER_TOKEN + ATTN_FLOPS_PER_UNIT * 1025) / (seconds * peak), rel=1e-6)
    assert 0.4 < eng.stress.last_mbu < 0.75 and eng.stress.last_mfu < 0.01  # decoding: memory-bound, as it is


def test_tensor_parallel_peaks_are_the_ranks_together_and_an_asic_has_none() -> None:
    tp2 = RooflineModel(ACCELERATORS["h100-sxm"], MODELS["llama-3.1-70b"], tp=2)  # type: ignore[arg-type]
    assert tp2.peaks == (2 * 3.35e12, 2 * 989e12)
    fp8 = build_model("h100-sxm", "llama-3.1-8b", "fp8")
    assert fp8.peaks == (3.35e12, 1979e12)
    asic = build_model("sram-asic", "llama-3.1-8b")
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
