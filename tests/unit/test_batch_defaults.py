"""vLLM 0.33's batch defaults by device, and what they change (issue 17, first difference)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.sim.build import build_engine
from harness.sim.engine import SimRequest
from harness.sim.virtual import VirtualRun


@pytest.mark.parametrize(("accelerator", "seqs", "tokens"), [
    ("a100-80g", 256, 2048), ("h100-sxm", 1024, 8192), ("h200", 1024, 8192),
    ("b200", 1024, 16384), ("mi300x", 1024, 16384),
])
def test_each_device_gets_vllms_defaults_unless_given(accelerator: str, seqs: int, tokens: int) -> None:
    cfg = SimulatorConfig(accelerator=accelerator)
    defaults = catalogue().devices[accelerator].batch_defaults()
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (seqs, tokens) == defaults
    given = SimulatorConfig(accelerator=accelerator, max_num_seqs=64, max_num_batched_tokens=4096)
    assert (given.max_num_seqs, given.max_num_batched_tokens) == (64, 4096)
    # What the bundled simulator is handed (its config as JSON) keeps the values, defaults or not.
    assert SimulatorConfig.model_validate_json(cfg.model_dump_json()) == cfg


@pytest.mark.parametrize(("memory_gb", "seqs", "tokens"), [
    (24, 256, 2048), (48, 256, 2048), (40, 256, 2048),  # L4 / A10G, L40S, A100-40G: under 70 GiB
    (96, 1024, 8192), (192, 1024, 16384),
])
def test_a_custom_gpu_gets_the_defaults_vllm_gives_its_memory(tmp_path, memory_gb: int, seqs: int,
                                                              tokens: int) -> None:
    from harness.devices.catalogue import load_presets

    path = tmp_path / "gpu.yaml"
    path.write_text(f"accelerators:\n  my-gpu-{memory_gb}: {{tflops: 300, hbm_tbps: 1.0, memory_gb: {memory_gb}}}\n")
    load_presets(path)
    cfg = SimulatorConfig(accelerator=f"my-gpu-{memory_gb}")
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (seqs, tokens)


def test_every_preset_has_defaults() -> None:
    assert all(min(catalogue().devices[a].batch_defaults()) > 0 for a in catalogue().devices)


def _burst(cfg: SimulatorConfig, users: int, prompt: int, out: int) -> tuple[float, float]:
    """`users` requests at once: TTFT p50 (s) and output tokens/s over the whole burst."""
    engine = build_engine(cfg.model_copy(update={"noise_sigma": 0.0}))
    run = VirtualRun(engine)
    reqs = [SimRequest(str(i), prompt, out, 0) for i in range(users)]
    for r in reqs:
        run.submit(r)
    end_ns = run.run()
    ttft = np.median([r.token_ns[0] - r.arrival_ns for r in reqs]) / 1e9
    return float(ttft), users * out / (end_ns / 1e9)


def test_768_users_on_an_h100_are_admitted_at_once_with_vllms_cap() -> None:
    """The issue measured a closed loop (TTFT p50 10.4 s with a cap of 256 sequences, 0.22 s with vLLM's 1,024,
    throughput 22% lower); one burst of the same 768 requests shows it too: 5.7 s against 1.4 s, +21%."""
    old_ttft, old_rate = _burst(SimulatorConfig(max_num_seqs=256, max_num_batched_tokens=8192), 768, 128, 256)
    ttft, rate = _burst(SimulatorConfig(), 768, 128, 256)
    assert ttft < 0.3 * old_ttft
    assert rate > 1.15 * old_rate


def test_a_long_prompt_stalls_decodes_less_on_an_a100_with_vllms_budget() -> None:
    """A 32k-token prompt among 64 decoding streams: each chunk step is what the decodes wait for."""
    def worst_gap_ms(tokens: int) -> float:
        cfg = SimulatorConfig(accelerator="a100-80g", max_num_batched_tokens=tokens, noise_sigma=0.0)
        run = VirtualRun(build_engine(cfg))
        decoders = [SimRequest(f"d{i}", 128, 200, 0) for i in range(64)]
        for r in decoders:
            run.submit(r)
        run.submit(SimRequest("long", 32_000, 1, 100_000_000))  # once the decodes are under way
        run.run()
        return max(float(np.max(np.diff(r.token_ns))) for r in decoders) / 1e6

    assert worst_gap_ms(2048) < 0.5 * worst_gap_ms(8192)


def test_the_older_scheduler_runs_without_async_scheduling_unless_told() -> None:
    assert SimulatorConfig().async_scheduling and SimulatorConfig().scheduler_compat == "0.33"
    older = SimulatorConfig(scheduler_compat="0.11")
    assert not older.async_scheduling and build_engine(older).config.compat == "0.11"
    assert SimulatorConfig(scheduler_compat="0.11", async_scheduling=True).async_scheduling
    with pytest.raises(ValueError, match="scheduler_compat"):
        SimulatorConfig(scheduler_compat="0.10")  # type: ignore[arg-type]
