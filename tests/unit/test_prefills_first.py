"""vLLM before chunked prefill (`scheduler_compat: "0.4"`, sim/prefills_first.py): a step of prompts or of
decodes, never both; prompts first, whole. In virtual time, no network."""

from __future__ import annotations

from harness.config.simulator import SimulatorConfig
from harness.devices.step import StepLoad
from harness.sim.build import build_engine, perf_model
from harness.sim.engine import SimRequest
from harness.sim.virtual import run_virtual


def _answers(compat: str) -> list[SimRequest]:
    engine = build_engine(SimulatorConfig(scheduler_compat=compat, noise_sigma=0, max_num_batched_tokens=8192))
    # four answers decoding, then a 6,000-token prompt arrives mid-answer
    reqs = [SimRequest(f"d{i}", 100, 40, 0) for i in range(4)] + [SimRequest("p", 6000, 2, 50_000_000)]
    run_virtual(engine, reqs)
    return reqs


def test_a_prompt_stalls_every_answer_for_its_whole_prefill() -> None:
    old, new = _answers("0.4"), _answers("0.33")
    prefill = perf_model(SimulatorConfig())[0].step_seconds(StepLoad(tokens=6000, seqs=1, prefill_attn=6000 ** 2 / 2))

    def longest_gap(req: SimRequest) -> float:
        return max(b - a for a, b in zip(req.token_ns, req.token_ns[1:], strict=False)) / 1e9

    # before chunked prefill the answers wait the prompt's whole step; today they ride along in a mixed step,
    # which costs them the prompt's chunk but not a step of their own
    assert longest_gap(old[0]) >= prefill
    assert longest_gap(new[0]) < longest_gap(old[0])
    # the prompt's first token comes as soon as its step ends: it went first
    assert (old[-1].token_ns[0] - old[-1].arrival_ns) / 1e9 < prefill * 1.2
    assert all(len(r.token_ns) == r.output_tokens for r in old + new)


def test_the_older_scheduler_is_a_scenario_setting() -> None:
    cfg = SimulatorConfig(scheduler_compat="0.4")
    assert cfg.async_scheduling is False  # V0 had none
    assert build_engine(cfg).whole_prompts and not build_engine(SimulatorConfig()).whole_prompts
    # changed() keeps the flag a config has; on_scheduler takes the scheduler's own
    assert SimulatorConfig().changed(scheduler_compat="0.4").async_scheduling is True
    assert SimulatorConfig().on_scheduler("0.4").async_scheduling is False
    assert cfg.on_scheduler("0.33").async_scheduling is True
