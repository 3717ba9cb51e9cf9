"""The roofline model against published vLLM latencies (issues 45, 63): each within its bound in its era, every
fitted term needed, the device ratios held, and docs/simulator.md showing the tables the code gives."""

import dataclasses
from pathlib import Path

import pytest

from harness.devices.catalogue import catalogue
from harness.devices.gpu import Accelerator
from harness.devices.roofline import VLLM_0_4, RooflineModel, RooflineParams
from harness.devices.step import StepLoad
from harness.sim.published import EARLY, POINTS, SERVING, TODAY, fit_eta_mem, ratio_table, ratios, serving_table, table

DOC = Path(__file__).parents[2] / "docs" / "simulator.md"


@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p.accelerator}-{p.model.name}-tp{p.tp}-b{p.batch}")
def test_each_published_point_within_its_bound(point) -> None:
    assert abs(point.error()) <= point.tolerance, \
        f"{point.source}: model {point.model_seconds():.3f} s against {point.seconds} s"


def _worst(params: RooflineParams | None, which=lambda point: True) -> float:  # type: ignore[no-untyped-def]
    return max(abs(p.error(params)) for p in POINTS if which(p))


def test_each_fitted_term_of_the_era_before_is_needed() -> None:
    early = lambda p: p.early  # noqa: E731
    assert _worst(VLLM_0_4, lambda p: p.early and p.tp == 8) <= 0.08
    # Without the barrier wait, tp 8 comes out too fast.
    assert _worst(dataclasses.replace(VLLM_0_4, barrier_s=0.0), lambda p: p.early and p.tp == 8) > 0.12
    # The experts' matmuls at the dense layers' efficiency: a growing batch costs too little; at a fifth of it
    # (what decode-only points alone once gave), a prompt of 1,000 tokens costs far too much.
    moe = lambda p: p.early and p.model.experts > 1  # noqa: E731
    assert _worst(dataclasses.replace(VLLM_0_4, moe_compute=1.0), moe) > 0.15
    assert _worst(dataclasses.replace(VLLM_0_4, moe_compute=0.18), moe) > 1.0
    # vLLM 0.2–0.4's host work is its own: today's per-sequence time and no hand-over miss those points.
    assert _worst(dataclasses.replace(VLLM_0_4, t_seq_s=10e-6, t_rank_s=0.0), early) > 0.25


def test_the_one_compromise_both_eras_paid_drifts_on_today_s_vllm_as_issue_63_measured() -> None:
    """The terms before issue 63 (every device at 0.75 of its peak, 1.25 ms a step, a 9 µs barrier, no clock):
    the dense 70B model at tp 4 on Hopper 9–15% too slow, Mixtral at tp 2 5–13% too fast, the H100-to-H200 gap
    too wide (1.23–1.33 against 1.18–1.21 published)."""
    before = RooflineParams(eta_mem=0.75, clock_ref_mhz=None, t0_s=1.25e-3, barrier_s=9e-6)
    errors = {(p.accelerator, p.model.name): p.error(before) for p in TODAY}
    for device in ("h100-sxm", "h200"):
        assert 0.09 <= errors[(device, "llama-3-70b")] <= 0.16
        assert -0.14 <= errors[(device, "mixtral-8x7b")] <= -0.04
    by = {(p.accelerator, p.model.name): p for p in TODAY}
    for name in ("llama-3.1-8b", "llama-3-70b", "mixtral-8x7b"):
        ratio = by[("h100-sxm", name)].model_seconds(before) / by[("h200", name)].model_seconds(before)
        published = by[("h100-sxm", name)].seconds / by[("h200", name)].seconds
        assert 1.17 <= published <= 1.22 and 1.22 <= ratio <= 1.34, name
    # Today's terms: every point within ±6%, held out or not.
    assert _worst(None, lambda p: not p.early) <= 0.06


def test_a_low_rate_serving_test_s_itl_is_one_sequence_s_decode_step_within_6_percent() -> None:
    assert SERVING and all(abs(p.model_ms() / p.itl_median_ms - 1) <= 0.06 for p in SERVING)


def test_the_device_ratios_hold_within_4_percent() -> None:
    for name, slow, fast, published_ratio, model_ratio in ratios():
        assert abs(model_ratio / published_ratio - 1) <= 0.04, f"{name} {slow}/{fast}"


def test_a_device_and_a_model_are_held_out_and_each_device_s_share_is_its_own_fit() -> None:
    held = [p for p in TODAY if p.held_out]
    assert {p.model.name for p in held} >= {"mixtral-8x7b"}
    assert all(p.held_out for p in TODAY if p.model.experts > 1)  # no MoE row of today fitted
    assert all(p.held_out for p in TODAY if p.accelerator == "h100-sxm" and p.tp > 1)
    for name in ("a100-80g", "h100-sxm", "h200"):
        device = catalogue().devices[name]
        assert isinstance(device, Accelerator) and device.eta_mem is not None
        assert fit_eta_mem(name) == pytest.approx(device.eta_mem, abs=0.002), name
    # One share for every device (the brief's 0.75) cannot hold both Hopper devices' single-GPU rows.
    assert _worst(dataclasses.replace(RooflineParams(), eta_mem=0.75), lambda p: not p.early and p.tp == 1) > 0.05
    assert len(EARLY) + len(TODAY) == len(POINTS)


def test_experts_stream_at_their_own_efficiency_and_dense_models_do_not_care() -> None:
    h100 = catalogue().devices["h100-sxm"]
    assert isinstance(h100, Accelerator)
    slow = dataclasses.replace(h100, expert_eta_mem=0.75)
    load = StepLoad(tokens=8, seqs=8, decodes=8, decode_context=8 * 1024)
    for name, changes in (("mixtral-8x7b", True), ("llama-3.1-8b", False)):
        fast_s = RooflineModel(h100, catalogue().models[name]).step_seconds(load)
        slow_s = RooflineModel(slow, catalogue().models[name]).step_seconds(load)
        assert (slow_s > fast_s * 1.05) is changes, name


def test_async_scheduling_hides_a_per_step_hand_over_to_the_ranks() -> None:
    h100 = catalogue().devices["h100-sxm"]
    assert isinstance(h100, Accelerator)
    load = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
    early = RooflineParams(t_rank_s=VLLM_0_4.t_rank_s)
    for async_on, hidden in ((True, True), (False, False)):
        m = RooflineModel(h100, catalogue().models["llama-3.1-70b"], tp=8, async_scheduling=async_on)
        handed = dataclasses.replace(m, params=early)
        assert (handed.step_seconds(load) == pytest.approx(m.step_seconds(load))) is hidden
        if not hidden:  # 0.9 ms for each doubling of the ranks: three at tp 8
            assert handed.step_seconds(load) - m.step_seconds(load) == pytest.approx(2.7e-3)


def test_the_docs_show_the_tables_the_code_gives() -> None:
    doc = DOC.read_text()
    for shown in (table(TODAY), ratio_table(), serving_table(), table(EARLY)):
        assert shown in doc, "regenerate with: python -m harness.sim.published"
