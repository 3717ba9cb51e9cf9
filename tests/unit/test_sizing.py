"""Sizing that tells the truth (issue 45): a configuration vLLM would not start names why — weights that do not
fit as weights — and the fewest devices that do start it, which then start; or that none within tp 64 does."""

from __future__ import annotations

import pytest

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue, use
from harness.devices.wafer import AsicAccelerator
from harness.sim.build import fit_problem


def problem(**fields: object) -> str | None:
    return fit_problem(SimulatorConfig.model_validate(fields))


@pytest.mark.parametrize(("fields", "why", "fewest"), [
    # 141 GB of bf16 weights on one 80 GB GPU: the weights, not the KV cache; tp 2 holds them but not a 128k
    # request's KV, tp 3 does not divide 64 heads: 4
    ({"accelerator": "h100-sxm", "model": "llama-3.1-70b"}, "llama-3.1-70b's weights (141 GB in bf16) do not fit "
     "1 × h100-sxm (gpu_memory_utilization 0.9): 73 GB for them and the KV cache", 4),
    ({"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 2}, "the model's max seq len (131,072) is larger "
     "than the maximum number of tokens that can be stored in KV cache (20,269)", 4),
    # Four 44 GB systems hold the weights but no KV cache for a 128k request: five start it
    ({"accelerator": "cerebras-cs3", "model": "llama-3.1-70b"}, "llama-3.1-70b's weights (141 GB in bf16) do not "
     "fit 1 × cerebras-cs3", 5),
    # fp8 weights (the embedding and LM head bf16 as shipped) on one A100: 6,751 tokens of KV, no 128k request
    ({"accelerator": "a100-80g", "model": "llama-3.1-70b", "dtype": "fp8"}, "estimated maximum model length is "
     "6,751", 2),
])
def test_the_fewest_devices_named_are_the_fewest_that_start(fields: dict[str, object], why: str, fewest: int) -> None:
    said = problem(**fields)
    assert said is not None and why in said and "\n" not in said
    assert said.endswith(f"the fewest that start it: tp {fewest} ({fewest} × "
                         f"{'CS-3 system (one wafer)' if fields['accelerator'] == 'cerebras-cs3' else 'GPU'})")
    assert problem(**{**fields, "tp": fewest}) is None
    # Every tp below it that vLLM would take (one that divides the model's 64 heads; any count of systems) fails
    lower = range(int(str(fields.get("tp", 1))), fewest)
    assert all(problem(**{**fields, "tp": n}) is not None for n in lower
               if fields["accelerator"] == "cerebras-cs3" or 64 % n == 0)


def test_a_device_no_count_within_the_limit_can_hold_is_told_so() -> None:
    use(catalogue().with_devices(AsicAccelerator(
        "sizing-chip", decode_ms_per_b_params=0.03, growth_per_seq=0.001, prefill_tokens_per_s_8b=30000,
        memory_gb=0.2, device="chip")))
    said = problem(accelerator="sizing-chip", model="llama-3.1-70b")
    assert said is not None and said.endswith("no tp up to 64 starts it (a smaller model, fewer bits a "
                                              "weight, or a larger accelerator)")
    assert "llama-3.1-70b's weights (141 GB in bf16) do not fit 1 × sizing-chip" in said


def test_an_fp8_kv_cache_holds_twice_the_tokens_and_reads_half_the_bytes_a_decode_step() -> None:
    """vLLM's --kv-cache-dtype fp8: one byte a value where bf16 takes two."""
    from harness.devices.step import StepLoad
    from harness.sim.build import perf_model

    auto = SimulatorConfig.model_validate({"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 4})
    fp8 = auto.model_copy(update={"kv_cache_dtype": "fp8"})
    (perf, kv), (perf8, kv8) = perf_model(auto), perf_model(fp8)
    assert kv8 == pytest.approx(2 * kv, abs=2)
    long = StepLoad(tokens=64, seqs=64, decodes=64, decode_context=64 * 16_000)
    bare = StepLoad(tokens=64, seqs=64, decodes=64)  # the weights alone
    kv_read = [p.step_cost(long).hbm_bytes - p.step_cost(bare).hbm_bytes for p in (perf, perf8)]
    assert kv_read[1] == pytest.approx(kv_read[0] / 2)
    assert perf8.step_seconds(long) < perf.step_seconds(long)
    # 70B in fp8 on one A100: 6,751 tokens of bf16 KV, no 128k request; an fp8 cache holds twice as many
    said = problem(accelerator="a100-80g", model="llama-3.1-70b", dtype="fp8", kv_cache_dtype="fp8")
    assert said is not None and "estimated maximum model length is 13,50" in said


def test_a_decode_step_runs_as_the_cuda_graph_that_holds_it_unless_eager() -> None:
    """vLLM captures CUDA graphs of 1, 2, 4, 8, 16, 24, … sequences (up to twice max_num_seqs, 512 at most): a
    decode step of 9 runs as 16, its linear layers' maths for 16 tokens; --enforce-eager pads nothing, and a step
    with a prompt in it is never padded."""
    from harness.devices.roofline import captured_sizes, graph_size
    from harness.devices.step import StepLoad
    from harness.sim.build import perf_model

    assert captured_sizes(512)[:6] == (1, 2, 4, 8, 16, 24) and captured_sizes(512)[-2:] == (496, 512)
    assert [graph_size(n, 512) for n in (3, 9, 248, 249, 257, 600)] == [4, 16, 248, 256, 272, 600]
    assert graph_size(9, 6) == 9  # past what a max_num_seqs of 3 captures (1, 2, 4): eager
    cfg = SimulatorConfig.model_validate({"accelerator": "h100-sxm", "model": "llama-3.1-8b", "max_num_seqs": 256})
    graphs, _ = perf_model(cfg)
    eager, _ = perf_model(cfg.model_copy(update={"enforce_eager": True}))
    nine, sixteen = StepLoad(tokens=9, seqs=9, decodes=9), StepLoad(tokens=16, seqs=16, decodes=16)
    per_token = graphs.step_cost(sixteen).flops / 16
    assert graphs.step_cost(nine).flops == pytest.approx(graphs.step_cost(sixteen).flops)
    assert eager.step_cost(nine).flops == pytest.approx(9 * per_token)
    mixed = StepLoad(tokens=9 + 100, seqs=10, decodes=9, prefill_attn=100 * 50)
    assert graphs.step_cost(mixed).flops == pytest.approx(eager.step_cost(mixed).flops)


def test_the_busiest_ranks_experts_match_a_simulated_routing() -> None:
    """With expert parallelism the step waits for the rank whose whole experts the batch touches most: the
    expected maximum, checked against routing drawn at random (and exact where it is plain)."""
    import numpy as np

    from harness.devices.roofline import slowest_rank_experts

    assert slowest_rank_experts(8, 1, 0.25) == pytest.approx(2.0)  # one rank: every touched expert
    assert slowest_rank_experts(8, 2, 1.0) == pytest.approx(4.0)  # all touched: a rank's whole share
    assert slowest_rank_experts(8, 8, 0.25) == pytest.approx(1 - 0.75 ** 8)  # one each: is any touched
    rng = np.random.default_rng(7)
    for experts, ranks, q in ((8, 2, 0.25), (8, 4, 0.4), (16, 4, 0.6), (64, 8, 0.1)):
        touched = rng.random((20_000, experts)) < q
        per_rank = touched.reshape(20_000, ranks, experts // ranks).sum(axis=2)
        assert slowest_rank_experts(experts, ranks, q) == pytest.approx(per_rank.max(axis=1).mean(), rel=0.02)


def test_expert_parallelism_costs_a_small_batch_its_imbalance_and_leaves_dense_models_alone() -> None:
    from harness.devices.step import StepLoad
    from harness.sim.build import perf_model

    def step_ms(model: str, ep: bool, batch: int) -> float:
        cfg = SimulatorConfig.model_validate({"accelerator": "h100-sxm", "model": model, "tp": 4,
                                              "enable_expert_parallel": ep, "enforce_eager": True})
        perf, _ = perf_model(cfg)
        return perf.step_seconds(StepLoad(tokens=batch, seqs=batch, decodes=batch, decode_context=batch * 1024))

    # One sequence touches 2 of Mixtral's 8 experts: split 4 ways they cost half an expert a rank; held whole, a
    # rank holding one reads all of it.
    assert step_ms("mixtral-8x7b", True, 1) > 1.2 * step_ms("mixtral-8x7b", False, 1)
    # A batch that touches every expert reads the same bytes either way.
    assert step_ms("mixtral-8x7b", True, 256) == pytest.approx(step_ms("mixtral-8x7b", False, 256), rel=0.01)
    assert step_ms("llama-3.1-70b", True, 1) == step_ms("llama-3.1-70b", False, 1)
