"""Today's models (issue 63), each from its config.json: the parameters its shape implies, the bytes its checkpoint
takes, the KV a token caches, and the fewest devices that start it as vLLM would."""

from __future__ import annotations

import re

import pytest

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.formats import weight_format
from harness.sim.build import fit_problem, perf_model

GIB = 2**30


def fewest(accelerator: str, model: str) -> int | None:
    """The fewest devices `fit_problem` says start the model (1: it starts as given)."""
    said = fit_problem(SimulatorConfig(accelerator=accelerator, model=model))
    if said is None:
        return 1
    found = re.search(r"the fewest that start it: tp (\d+)", said)
    return int(found.group(1)) if found else None


@pytest.mark.parametrize(("model", "layers_with_experts", "expert_matrices"), [
    # (routed experts' layers, one expert's three matrices: gate, up, down of hidden × moe width)
    ("deepseek-v3", 58, 3 * 7168 * 2048),  # 61 layers, the first 3 dense
    ("qwen3-30b-a3b", 48, 3 * 2048 * 768),
    ("qwen3-235b-a22b", 94, 3 * 4096 * 1536),
    ("gpt-oss-120b", 36, 3 * 2880 * 2880),
    ("gpt-oss-20b", 24, 3 * 2880 * 2880),
])
def test_an_expert_s_parameters_follow_from_the_totals_the_model_card_gives(
        model: str, layers_with_experts: int, expert_matrices: int) -> None:
    """The totals and active counts of the model cards, and the shape of config.json, agree: one expert summed over
    its layers, (total − active) / (experts − routed), is its matrices' size within 4%."""
    spec = catalogue().models[model]
    assert spec.expert_params == pytest.approx(layers_with_experts * expert_matrices, rel=0.04)


@pytest.mark.parametrize(("model", "published_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_checkpoints_take_what_openai_ships(model: str, published_gib: float) -> None:
    """MXFP4 experts (4.25 bits a weight with their scales), attention, router, embedding and head in bf16: the
    checkpoint's size as published (60.8 GiB and 12.8 GiB)."""
    spec = catalogue().models[model]
    assert spec.weights == "fp4" and spec.quantised == "experts"
    assert spec.weight_bytes(weight_format("fp4")) / GIB == pytest.approx(published_gib, rel=0.07)


def test_deepseek_v3_caches_a_latent_several_times_smaller_than_its_heads_would_and_whole_on_each_rank() -> None:
    spec = catalogue().models["deepseek-v3"]
    assert spec.kv_bytes_per_token(2) == 61 * (512 + 64) * 2  # 70 kB a token
    assert 2 * 61 * 128 * 128 * 2 / spec.kv_bytes_per_token(2) > 50  # K and V for 128 heads: 4 MB
    assert spec.kv_split(8) == 1 and catalogue().models["llama-3.1-70b"].kv_split(8) == 8
    assert catalogue().models["qwen3-235b-a22b"].kv_split(8) == 4  # 4 kv heads: replicated beyond them
    # Its checkpoint is fp8 (what `weights: auto` serves): 671 B weights, the embedding and head in bf16.
    assert spec.format("auto").name == "fp8"
    cfg = SimulatorConfig(accelerator="h200", model="deepseek-v3", tp=8)
    perf, kv = perf_model(cfg)
    weights, room = perf.memory()
    assert weights / 1e9 == pytest.approx(671 + 2 * 129280 * 7168 / 1e9, rel=0.01)
    # The latent is held whole on all 8 ranks: the room left over the latent's bytes on every rank
    assert kv == pytest.approx((room - weights) / (8 * spec.kv_bytes_per_token(2)), rel=0.01)


@pytest.mark.parametrize(("model", "accelerator", "devices"), [
    # bf16 Llama-3.3-70B (141 GB): two H100s hold the weights but not a 128k request's KV; 3 does not divide 64
    ("llama-3.3-70b", "h100-sxm", 4), ("llama-3.3-70b", "h200", 2),
    ("qwen3-30b-a3b", "h100-sxm", 1),  # 61 GB of bf16
    ("qwen3-235b-a22b", "h100-sxm", 8), ("qwen3-235b-a22b", "h200", 4),  # 470 GB of bf16
    ("deepseek-v3", "h100-sxm", 16), ("deepseek-v3", "h200", 8),  # 673 GB of fp8: two nodes of H100, one of H200
    ("gpt-oss-120b", "h100-sxm", 1), ("gpt-oss-20b", "a100-80g", 1),  # "runs on a single 80 GB GPU"
])
def test_the_fewest_devices_that_start_each_of_today_s_models(model: str, accelerator: str, devices: int) -> None:
    assert fewest(accelerator, model) == devices
    if devices > 1:  # and they do start it
        assert fit_problem(SimulatorConfig(accelerator=accelerator, model=model, tp=devices)) is None


def test_gpt_oss_s_windowed_layers_keep_no_kv_past_their_window() -> None:
    """Every other layer attends 128 tokens: its KV is left out of a token's (vLLM's hybrid cache), so the
    120b model's 128k context fits one H100 as OpenAI says it does."""
    spec = catalogue().models["gpt-oss-120b"]
    assert spec.full_layers == 18 and spec.kv_bytes_per_token(2) == 2 * 18 * 8 * 64 * 2
    assert fit_problem(SimulatorConfig(accelerator="h100-sxm", model="gpt-oss-120b")) is None
