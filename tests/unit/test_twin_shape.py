"""The fitted twin's engine shape (issue 34), against hand-computed step times in virtual time: a prompt processed
inside the steps the running streams decode in (in chunks of the engine's batch), a first token that leaves one
step after its prompt's (llama.cpp), and requests beyond the engine's slots waiting for one."""

from __future__ import annotations

import numpy as np
import pytest

from harness.devices.catalogue import catalogue, use
from harness.devices.fitted import FittedAccelerator, FittedModel
from harness.records import RequestRecord
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.virtual import run_virtual
from harness.twin.fit import fit_steps
from harness.twin.samples import lone_prompts, step_samples

MS = 1_000_000
# 10 ms a step, +2 ms a sequence, +1 ms per 100 tokens processed (10 ms per 1k): no roofline blend (weights 0).
TWIN = FittedAccelerator("shape-twin", step_ms=10.0, weights_ms=0.0, per_ktoken_ms=10.0, per_seq_ms=2.0,
                         per_context_ktoken_ms=0.0, kv_tokens=1_000_000)


def engine(first_token_delay: bool = False, max_num_seqs: int = 64, max_num_batched_tokens: int = 512) -> Engine:
    return Engine(FittedModel(TWIN), EngineConfig(max_num_seqs=max_num_seqs, kv_blocks=60_000, noise_sigma=0.0,
                                                  max_num_batched_tokens=max_num_batched_tokens,
                                                  prefix_caching=False, first_token_delay=first_token_delay))


def step_ms(seqs: int, tokens: int) -> float:
    return 10.0 + 2.0 * seqs + 10.0 * tokens / 1000


def test_a_prompt_processed_inside_the_decode_steps_stalls_the_running_stream() -> None:
    """A decodes alone (12.01 ms a step); B's 1,000-token prompt arrives and is processed in chunks of the
    512-token batch, inside A's steps: A's gaps stretch to 14 + 5.12 (A's token and 511 of B's) and then
    14 + 4.90 (A's, 489 of B's), then both decode (14.02 ms)."""
    a = SimRequest("a", 16, 8, 0)
    b = SimRequest("b", 1000, 4, int(30 * MS))  # arrives during A's third step
    run_virtual(engine(), [a, b])
    gaps = [(t1 - t0) / MS for t0, t1 in zip(a.token_ns, a.token_ns[1:], strict=False)]
    alone = step_ms(1, 1)
    assert a.token_ns[0] / MS == step_ms(1, 16)  # its own prompt first
    assert gaps[:2] == [alone, alone]
    assert gaps[2] == step_ms(2, 1 + 511) and gaps[3] == step_ms(2, 1 + 489)  # B's chunks inside A's steps
    assert gaps[4] == step_ms(2, 2)
    assert b.token_ns[0] == a.token_ns[4]  # B's first token leaves with its last chunk's step


def test_the_first_token_leaves_one_step_after_its_prompts() -> None:
    """llama.cpp's shape: the prompt's step samples the first token, the next step sends it; ITL unchanged."""
    plain, late = SimRequest("p", 200, 3, 0), SimRequest("q", 200, 3, 0)
    run_virtual(engine(), [plain])
    run_virtual(engine(first_token_delay=True), [late])
    prompt, decode = step_ms(1, 200), step_ms(1, 1)
    assert plain.token_ns[0] / MS == prompt
    assert late.token_ns[0] / MS == prompt + step_ms(1, 0)  # one more step, riding with nothing to compute
    assert [(t - late.token_ns[0]) / MS for t in late.token_ns[1:]] == [decode, 2 * decode]


def test_requests_beyond_the_slots_wait_for_one() -> None:
    """Two slots, four requests at once: the third and fourth start only as the first two finish."""
    reqs = [SimRequest(str(i), 10, 2, 0) for i in range(4)]
    run_virtual(engine(max_num_seqs=2), reqs)
    first_two = {r.token_ns[-1] for r in reqs[:2]}
    assert len(first_two) == 1  # the first two ran together
    done = first_two.pop()
    assert all(r.token_ns[0] > done for r in reqs[2:])  # the others waited for a slot
    assert reqs[2].token_ns[0] == done + round(step_ms(2, 20) * MS)


def test_a_fitted_preset_carries_its_slots_and_batch_into_the_engine() -> None:
    use(catalogue().with_devices(FittedAccelerator("shape-twin-8", 10.0, 0.0, 10.0, 2.0, 0.0, 1_000_000, slots=8,
                                                   batch_tokens=2048, first_token_step=1)))
    assert catalogue().devices["shape-twin-8"].batch_defaults() == (8, 2048)
    assert catalogue().devices["h100-sxm"].batch_defaults() == (1024, 8192)  # vLLM's own, unchanged


def _records(first_token_delay: bool) -> list[RequestRecord]:
    """A minute of requests through the shape twin's engine, as a client would have recorded them."""
    rng = np.random.default_rng(4)
    arrivals = np.cumsum(rng.exponential(0.25, 160)) * 1e9
    reqs = [SimRequest(str(i), int(rng.integers(64, 800)), 24, int(t)) for i, t in enumerate(arrivals)]
    run_virtual(engine(first_token_delay, max_num_batched_tokens=8192), reqs)
    return [RequestRecord(r.request_id, "p", i, r.prompt_tokens, 24, r.arrival_ns, sent_ns=r.arrival_ns,
                          first_token_ns=r.token_ns[0], last_token_ns=r.token_ns[-1], end_ns=r.token_ns[-1],
                          chunk_ns=list(r.token_ns), prompt_tokens=r.prompt_tokens, completion_tokens=24)
            for i, r in enumerate(reqs)]


def test_the_fit_finds_which_step_a_first_token_leaves_with() -> None:
    """Fitted both ways — prompts in the step their first token ends, or the step before — the attribution the
    engine really used explains the gaps better, and with it the fit recovers the prompt cost (10 ms per 1k)."""
    for delay, right in ((False, 0), (True, 1)):
        records = _records(delay)
        fits = {lead: fit_steps(step_samples(records, lead)) for lead in (0, 1)}
        assert fits[right]["rms_ms"] < fits[1 - right]["rms_ms"], (delay, fits)
        assert fits[right]["per_ktoken_ms"] == pytest.approx(10.0, rel=0.15), (delay, fits[right])


def test_a_prompt_alone_is_seen_whole_through_its_ttft() -> None:
    """At a low load no other stream's gap shows a prompt's step; its own TTFT does, less the step its first
    token waited for (llama.cpp's shape: priced at its own median gap)."""
    for delay in (False, True):
        alone = SimRequest("alone", 300, 6, 0)
        run_virtual(engine(delay), [alone])
        record = RequestRecord("alone", "p", 0, 300, 6, 0, sent_ns=0, first_token_ns=alone.token_ns[0],
                               last_token_ns=alone.token_ns[-1], end_ns=alone.token_ns[-1],
                               chunk_ns=list(alone.token_ns), prompt_tokens=300)
        (row,) = lone_prompts([record], int(delay))
        expected = step_ms(1, 300) + (step_ms(1, 0) - step_ms(1, 1) if delay else 0.0)
        assert row[0] == pytest.approx(expected, abs=1e-6) and list(row[1:]) == [1.0, 0.3, 0.3, 1.0]
