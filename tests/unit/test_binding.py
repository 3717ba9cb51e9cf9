"""What binds a prediction (issue 63): the conclusion of `predict --accelerators` names it for each pick — KV
capacity when the engine had to preempt, the link when the all-reduces outlast the reads and the arithmetic, else
memory bandwidth or compute, whichever bound most of the step time."""

from __future__ import annotations

from typing import Any

import pytest

from harness.config.scenario import parse_scenario
from harness.devices.catalogue import catalogue, use
from harness.devices.gpu import Accelerator
from harness.tools.predict import predict


def binding(simulator: dict[str, Any], prompt: int, output: int, load: dict[str, Any]) -> str | None:
    scenario = parse_scenario({"name": "b", "seed": 1, "simulator": {"noise_sigma": 0, **simulator},
                               "workload": {"prompt_tokens": prompt, "output_tokens": output},
                               "phases": [{"name": "p", "load": load}]}, "test")
    stress = predict(scenario).phases[0].stress
    assert stress is not None
    return stress.binding


def test_a_light_decode_load_is_bound_by_memory_and_long_prompts_by_compute() -> None:
    assert binding({}, 64, 256, {"type": "poisson", "rate": 2, "requests": 10}) == "memory bandwidth"
    assert binding({}, 8000, 2, {"type": "batch", "size": 16, "batches": 1}) == "compute"


def test_a_kv_cache_too_small_for_the_load_binds_it() -> None:
    # 2,048 tokens of context each, 64 at once, in a KV cache of ~19k tokens: the engine preempts
    simulator = {"max_model_len": 4096, "gpu_memory_utilization": 0.29}
    assert binding(simulator, 1024, 1024, {"type": "batch", "size": 64, "batches": 1}) == "KV capacity"


def test_all_reduces_over_a_slow_link_bind_a_small_model_split_eight_ways() -> None:
    use(catalogue().with_devices(Accelerator("pcie-card", 362, 0.864, 48, link_gbps=2, link="pcie")))
    assert binding({"accelerator": "pcie-card", "tp": 8}, 512, 64,
                   {"type": "batch", "size": 32, "batches": 1}) == "link"
    # and the same card fully connected at a datacentre link's speed: the reads again
    use(catalogue().with_devices(Accelerator("nvlink-card", 362, 0.864, 48, link_gbps=450, link="nvlink")))
    assert binding({"accelerator": "nvlink-card", "tp": 8}, 512, 64,
                   {"type": "batch", "size": 32, "batches": 1}) in ("memory bandwidth", "compute")


@pytest.mark.parametrize("name", ["memory bandwidth", "compute", "link", "KV capacity"])
def test_each_binding_is_one_the_matrix_sentence_can_say(name: str) -> None:
    from harness.stats.schema import Stress

    assert Stress(source="simulator", basis="b", binding=name).binding == name  # type: ignore[arg-type]
