"""The twin's fit on records made by hand: which step owns which prefill, what it held, and the coefficients."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.scenario import parse_scenario
from harness.devices.catalogue import catalogue, use
from harness.devices.fitted import FittedAccelerator
from harness.records import RequestRecord
from harness.stats.server import Row
from harness.tools.predict import predict
from harness.twin.fit import fit_steps, kv_capacity
from harness.twin.samples import step_samples

MS = 1_000_000


def record(i: int, prompt: int, sent_ms: float, chunks_ms: list[float]) -> RequestRecord:
    return RequestRecord(request_id=str(i), phase="p", index=i, prompt_tokens_requested=prompt, max_tokens=9,
                         intended_ns=int(sent_ms * MS), sent_ns=int(sent_ms * MS), prompt_tokens=prompt,
                         first_token_ns=int(chunks_ms[0] * MS), last_token_ns=int(chunks_ms[-1] * MS),
                         chunk_ns=[int(c * MS) for c in chunks_ms])


def test_a_prefill_belongs_to_the_step_it_ended_and_each_gap_knows_the_batch() -> None:
    # A decodes in 10 ms steps; B (500 prompt tokens) is prefilled in the step A sees end at 40 ms, whose
    # chunk reaches the client 0.4 ms after A's; then both decode.
    a = record(0, 100, 0, [10, 20, 30, 40, 50, 60])
    b = record(1, 500, 29, [40.4, 50.4, 60.4])
    rows = step_samples([a, b])
    gaps_of_a = rows[:5]
    assert list(gaps_of_a[:, 0]) == [10.0] * 5
    assert list(gaps_of_a[:, 3] * 1e3) == [0, 0, 500, 0, 0]  # only the (30, 40] step computed B's prompt
    assert list(gaps_of_a[:, 1]) == [1, 1, 2, 2, 2]  # B counts in the step prefilling it, as the engine counts
    # Context at 45 ms: A's 100 + 4 tokens, B's 500 + 1.
    assert gaps_of_a[3, 2] * 1e3 == pytest.approx(605)


def test_the_fit_recovers_coefficients_from_steps_it_could_have_made() -> None:
    rng = np.random.default_rng(1)
    seqs = rng.integers(1, 64, 3000).astype(float)
    context = seqs * rng.uniform(0.2, 2.0, 3000)  # thousands of tokens
    prefill = np.where(rng.random(3000) < 0.15, rng.uniform(0.05, 3.0, 3000), 0.0)
    truth = {"step_ms": 2.0, "weights_ms": 6.0, "per_ktoken_ms": 60.0, "per_seq_ms": 0.02,
             "per_context_ktoken_ms": 0.11}
    gap = (truth["step_ms"] + truth["per_seq_ms"] * seqs + truth["per_context_ktoken_ms"] * context
           + np.hypot(truth["weights_ms"], truth["per_ktoken_ms"] * (seqs / 1e3 + prefill)))
    gap *= np.exp(0.01 * rng.standard_normal(3000))
    gap[:30] += 80.0  # a few stalls (a GC pause, a slow scrape): left out by the refit
    fitted = fit_steps(np.column_stack([gap, seqs, context, prefill]))
    assert fitted["step_ms"] + fitted["weights_ms"] == pytest.approx(8.0, rel=0.05)
    assert fitted["per_ktoken_ms"] == pytest.approx(60.0, rel=0.05)
    assert fitted["per_seq_ms"] == pytest.approx(0.02, abs=0.01)
    assert fitted["per_context_ktoken_ms"] == pytest.approx(0.11, rel=0.15)


def test_kv_capacity_is_tokens_held_over_usage_when_nothing_waits() -> None:
    a = record(0, 1000, 0, [50, 60, 70, 80])
    b = record(1, 2000, 5, [90, 100])
    rows = [Row(int(65 * MS), {"kv_cache_usage": 0.25, "waiting": 0.0}),  # A: 1,000 + 2 tokens; B sent: 2,000
            Row(int(66 * MS), {"kv_cache_usage": 0.5, "waiting": 3.0}),  # requests waited: not counted
            Row(int(95 * MS), {"kv_cache_usage": 0.01, "waiting": 0.0})]  # too little used to say
    assert kv_capacity([a, b], rows) == int((1002 + 2000) / 0.25)
    assert kv_capacity([a, b], rows[1:]) is None


def test_a_fitted_request_time_delays_every_first_token_by_itself_in_virtual_time() -> None:
    """At low load (one request at a time, no noise) the engine idles between requests: a 7 ms request time
    moves every TTFT by 7 ms and leaves the steps, so the ITL, alone."""
    steps = {"step_ms": 2.0, "weights_ms": 6.0, "per_ktoken_ms": 60.0, "per_seq_ms": 0.0,
             "per_context_ktoken_ms": 0.0, "kv_tokens": 100_000}
    latency = {}
    for request_ms in (0.0, 7.0):
        use(catalogue().with_devices(FittedAccelerator("twin-test", **steps, request_ms=request_ms)))
        scenario = parse_scenario({
            "name": "spaced", "workload": {"prompt_tokens": 200, "output_tokens": 8},
            "simulator": {"accelerator": "twin-test", "noise_sigma": 0},
            "phases": [{"name": "p", "load": {"type": "constant", "rate": 2, "requests": 6}}]}, "test")
        latency[request_ms] = predict(scenario).to_json()["phases"][0]["latency_ms"]
    for stat in ("p50", "max"):
        assert latency[7.0]["ttft"][stat] - latency[0.0]["ttft"][stat] == pytest.approx(7.0, abs=1e-6)
    assert latency[7.0]["itl"]["p50"] == pytest.approx(latency[0.0]["itl"]["p50"], abs=1e-9)


def test_the_fit_says_why_kv_was_not_measured() -> None:
    """Runs that scraped KV usage but never reached 5% are not runs that scraped none (the fit said the latter)."""
    from harness.twin.fit import Fit

    device = FittedAccelerator("t", step_ms=1.0, weights_ms=1.0, per_ktoken_ms=1.0, per_seq_ms=0.0,
                               per_context_ktoken_ms=0.0, kv_tokens=10)
    assert Fit(device, 50, True, 0.4).kv_note == ""
    assert "scraped no KV usage" in Fit(device, 50, False, None).kv_note
    low = Fit(device, 50, False, 0.02).kv_note
    assert "peaked at 2%, under the 5%" in low and "scraped no" not in low
