"""`harness sim twin`'s design: which runs, at which loads, how long, within which budget (no network)."""

from __future__ import annotations

import itertools

import pytest

from harness.errors import UsageError
from harness.twin.design import PROBE_LENGTHS, Probe, batch_sizes, design, minutes, refined, within

LLAMA = Probe(ttft_ms=330.0, itl_ms=24.0, prompt_tokens=128)  # llama-server on 2 cores, Gemma 3 270M


def test_every_batch_size_is_ramped_up_to_sixteen_then_a_ladder_to_the_slot_count() -> None:
    assert batch_sizes(8) == list(range(1, 9))
    wide = batch_sizes(256)
    assert wide[:16] == list(range(1, 17)) and wide[-1] == 256
    assert all(b > a for a, b in itertools.pairwise(wide)) and len(wide) < 30


def test_the_design_holds_each_batch_size_and_holds_out_loads_it_does_not_fit_on() -> None:
    plan = design(8, LLAMA, context_tokens=1024)
    ramp = [r for r in plan.role("fit") if r.name.startswith("ramp-")]
    assert [r.load["concurrency"] for r in ramp] == list(range(1, 9))
    assert all(r.load["type"] == "concurrency" and r.load["requests"] == 2 * r.load["concurrency"] for r in ramp)
    prompts = [r for r in plan.role("fit") if r.name.startswith("prompt-")]
    # A slot's context of 1,024 holds prompts of at most 504 with their 8 answer tokens and room to spare
    assert [r.prompt_tokens for r in prompts] == [128, 504] and all(r.load["concurrency"] == 1 for r in prompts)
    (together,) = [r for r in plan.role("fit") if r.load["type"] == "batch"]  # prompts of a length held out by none
    assert together.load["size"] == 8 and together.prompt_tokens == 256 and together.output_tokens < 16
    fit_rate = next(r.load["rate"] for r in plan.role("fit") if r.load["type"] == "poisson")
    held = {r.load["type"]: r for r in plan.role("held")}
    assert set(held) == {"poisson", "concurrency", "batch"}
    # The loads at the slot count run twice, after the ramp and last: the engine's own difference on them
    names = [r.name for r in plan.runs]
    assert [r.name for r in plan.role("held")] == ["closed-8", "batch-8", "poisson-held", "closed-8-again",
                                                   "batch-8-again"]
    assert names.index("closed-8") == names.index("ramp-8") + 1 and names[-2:] == ["closed-8-again", "batch-8-again"]
    assert [r.load for r in plan.runs if r.name.startswith("closed-")] == [held["concurrency"].load] * 2
    assert 0 < float(held["poisson"].load["rate"]) < float(fit_rate) < plan.capacity_rps
    assert held["concurrency"].load["concurrency"] == 8 and held["batch"].load["size"] == 8
    assert plan.estimate_s == pytest.approx(sum(r.estimate_s for r in plan.runs))
    # The held-out runs are the user's workload, not the ramp's decode-heavy one
    assert {r.prompt_tokens for r in plan.role("held")} == {128}


def test_without_a_context_every_probe_length_is_tried() -> None:
    plan = design(4, LLAMA)
    assert [r.prompt_tokens for r in plan.role("fit") if r.name.startswith("prompt-")] == list(PROBE_LENGTHS)


def test_a_slower_engine_is_estimated_to_take_longer_and_offered_less() -> None:
    fast, slow = design(8, Probe(20.0, 8.0, 128)), design(8, LLAMA)
    assert slow.estimate_s > fast.estimate_s and slow.capacity_rps < fast.capacity_rps


def test_a_tight_budget_shortens_the_design_and_one_too_tight_is_refused_naming_the_flag() -> None:
    full = design(8, LLAMA, 1024)
    shorter = within(8, LLAMA, full.estimate_s * 0.8, 1024)
    assert shorter.estimate_s <= full.estimate_s * 0.8 and shorter.estimate_s < full.estimate_s
    assert within(8, LLAMA, full.estimate_s + 1, 1024).estimate_s == pytest.approx(full.estimate_s)
    with pytest.raises(UsageError, match=r"^--budget: 6 s is too short.*takes ~\d\.\d min \(one request alone: "
                                         r"TTFT 330 ms, ITL 24\.0 ms, 8 slots"):
        within(8, LLAMA, 6.0, 1024)
    shortest = design(8, LLAMA, 1024, rounds=1, scale=0.33).estimate_s + full.estimate_s - 30  # the probe took most
    with pytest.raises(UsageError, match=rf"^--budget: {minutes(full.estimate_s + 1)} is too short.*takes "
                                         rf"~{minutes(shortest)} \("):
        within(8, LLAMA, full.estimate_s + 1, 1024, spent_s=full.estimate_s - 30)


def test_each_run_is_a_scenario_with_the_tokenizer_asked_for() -> None:
    run = design(2, LLAMA).runs[0]
    data = run.scenario("server")
    assert data["workload"] == {"prompt_tokens": 32, "output_tokens": 64, "tokenizer": "server"}
    assert data["phases"] == [{"name": "ramp-1", "load": run.load}]
    assert run.scenario(None)["workload"] == {"prompt_tokens": 32, "output_tokens": 64}


def test_after_the_ramp_the_open_loop_rates_follow_the_measured_capacity() -> None:
    """llama-server's real steps rise faster than the guess (15 ms alone, 70 at eight): the rates fall with it."""
    plan = design(8, Probe(363.0, 15.0, 128), context_tokens=1024)
    done = [r.name for r in plan.runs].index("poisson-fit")  # everything before the Poisson load has run
    measured = Probe(285.0, 15.0, 128, (14.3, 33.4, 53.2, 46.8, 70.0, 60.8, 83.1, 69.8))
    again = refined(plan, 8, measured, done, 1024)
    assert again.runs[:done] == plan.runs[:done] and [r.name for r in again.runs] == [r.name for r in plan.runs]
    rates = {r.name: float(r.load["rate"]) for r in again.runs if r.load["type"] == "poisson"}
    before = {r.name: float(r.load["rate"]) for r in plan.runs if r.load["type"] == "poisson"}
    assert again.capacity_rps < plan.capacity_rps and all(rates[n] < before[n] for n in rates)
    # 8 slots, each 8 × 285 ms of prompts and 64 steps of 69.8 ms: ~1.19 req/s
    assert again.capacity_rps == pytest.approx(8 / (8 * 0.285 + 64 * 0.0698), rel=1e-6)


def test_an_engine_slower_than_its_probe_gets_fewer_open_loop_requests_to_stay_within_the_budget() -> None:
    """A ramp measured on a busy machine: steps three times the probe's, so the Poisson runs at the rates that
    follow would take three times as long; within what is left of the budget they get fewer requests."""
    plan = design(8, Probe(300.0, 15.0, 128), context_tokens=1024)
    done = [r.name for r in plan.runs].index("poisson-fit")
    slow = Probe(300.0, 15.0, 128, tuple(45.0 * (1 + 0.35 * b) for b in range(8)))
    full = refined(plan, 8, slow, done, 1024)
    rest = sum(r.estimate_s for r in full.runs[done:])
    squeezed = refined(plan, 8, slow, done, 1024, left_s=rest * 0.75)
    assert squeezed.runs[:done] == plan.runs[:done]
    assert sum(r.estimate_s for r in squeezed.runs[done:]) <= rest * 0.75
    assert [r.load["requests"] for r in squeezed.runs if r.load["type"] == "poisson"] == [32, 32]
    # Past even the fewest requests, the shortest rest, and the caller says it overruns
    tight = refined(plan, 8, slow, done, 1024, left_s=1.0)
    assert [r.load["requests"] for r in tight.runs if r.load["type"] == "poisson"] == [16, 16]
    assert refined(plan, 8, slow, done, 1024, left_s=rest + 1).runs == full.runs
