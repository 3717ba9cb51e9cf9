"""The roofline model against published vLLM latencies (issue 45): each within its bound, every fitted term needed,
and docs/simulator.md showing the table the code gives."""

import dataclasses
from pathlib import Path

import pytest

from harness.config.presets import ACCELERATORS, MODELS, Accelerator
from harness.sim import published
from harness.sim.perfmodel import RooflineModel, RooflineParams, StepLoad
from harness.sim.published import POINTS, table

DOC = Path(__file__).parents[2] / "docs" / "simulator.md"


@pytest.mark.parametrize("point", POINTS, ids=lambda p: f"{p.accelerator}-{p.model.name}-tp{p.tp}-b{p.batch}")
def test_each_published_point_within_its_bound(point) -> None:
    assert abs(point.error()) <= point.tolerance, \
        f"{point.source}: model {point.model_seconds():.3f} s against {point.seconds} s"


def _worst(params: RooflineParams, which=lambda point: True) -> float:  # type: ignore[no-untyped-def]
    return max(abs(p.error(params)) for p in POINTS if which(p))


def test_each_fitted_term_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = RooflineParams()
    assert _worst(fitted, lambda p: p.tp == 8) <= 0.08
    # Without the barrier wait, tp 8 comes out too fast.
    assert _worst(dataclasses.replace(fitted, barrier_s=0.0), lambda p: p.tp == 8) > 0.12
    # The experts' matmuls at the dense layers' efficiency: a growing batch costs too little; at a fifth of it
    # (what decode-only points alone once gave), a prompt of 1,000 tokens costs far too much.
    moe = lambda p: p.model.experts > 1  # noqa: E731
    assert _worst(dataclasses.replace(fitted, moe_compute=1.0), moe) > 0.15
    assert _worst(dataclasses.replace(fitted, moe_compute=0.18), moe) > 1.0
    # vLLM 0.2–0.4's host work is its own: today's per-sequence time and no hand-over miss those points.
    monkeypatch.setattr(published, "EARLY_HOST", {"t_seq_s": fitted.t_seq_s, "t_rank_s": 0.0})
    assert _worst(fitted, lambda p: p.vllm.startswith("0.")) > 0.25


def test_experts_stream_at_their_own_efficiency_and_dense_models_do_not_care() -> None:
    h100 = ACCELERATORS["h100-sxm"]
    assert isinstance(h100, Accelerator)
    slow = dataclasses.replace(h100, expert_eta_mem=0.75)
    load = StepLoad(tokens=8, seqs=8, decodes=8, decode_context=8 * 1024)
    for name, changes in (("mixtral-8x7b", True), ("llama-3.1-8b", False)):
        fast_s = RooflineModel(h100, MODELS[name]).step_seconds(load)
        slow_s = RooflineModel(slow, MODELS[name]).step_seconds(load)
        assert (slow_s > fast_s * 1.05) is changes, name


def test_async_scheduling_hides_a_per_step_hand_over_to_the_ranks() -> None:
    h100 = ACCELERATORS["h100-sxm"]
    assert isinstance(h100, Accelerator)
    load = StepLoad(tokens=1, seqs=1, decodes=1, decode_context=1024)
    early = RooflineParams(t_rank_s=published.EARLY_HOST["t_rank_s"])
    for async_on, hidden in ((True, True), (False, False)):
        m = RooflineModel(h100, MODELS["llama-3.1-70b"], tp=8, async_scheduling=async_on)
        handed = dataclasses.replace(m, params=early)
        assert (handed.step_seconds(load) == pytest.approx(m.step_seconds(load))) is hidden
        if not hidden:  # 0.9 ms for each doubling of the ranks: three at tp 8
            assert handed.step_seconds(load) - m.step_seconds(load) == pytest.approx(2.7e-3)


def test_the_docs_show_the_table_the_code_gives() -> None:
    assert table() in DOC.read_text(), "regenerate with: python -m harness.sim.published"
