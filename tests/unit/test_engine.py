"""The step engine in virtual time: batching, budgets, chunked prefill, KV exhaustion."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.devices.catalogue import catalogue
from harness.devices.roofline import RooflineModel
from harness.devices.step import StepCost, StepLoad
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.kvcache import block_hashes, blocks_for
from harness.sim.virtual import run_virtual
from harness.tokens import make_text

PERF = RooflineModel(catalogue().devices["h100-sxm"], catalogue().models["llama-3.1-8b"])  # type: ignore[arg-type]


def engine(**kw: int | float) -> Engine:
    cfg = {"kv_blocks": 20_000, "noise_sigma": 0.0, "prefix_caching": False, **kw}
    return Engine(PERF, EngineConfig(**cfg))  # type: ignore[arg-type]


class RecordingModel:
    """Wraps the roofline model and keeps every step's load."""

    peaks = PERF.peaks

    def __init__(self) -> None:
        self.loads: list[StepLoad] = []

    def step_cost(self, load: StepLoad) -> StepCost:
        self.loads.append(load)
        return PERF.step_cost(load)

    def step_seconds(self, load: StepLoad) -> float:
        return self.step_cost(load).seconds


def test_every_request_gets_exactly_its_tokens_in_order() -> None:
    eng = engine()
    reqs = [SimRequest(str(i), 100 + i, 20 + i, arrival_ns=i * 1_000_000) for i in range(30)]
    run_virtual(eng, reqs)
    for r in reqs:
        assert len(r.token_ns) == r.output_tokens
        assert r.finished and np.all(np.diff(r.token_ns) > 0)
        assert r.token_ns[0] > r.arrival_ns
    assert eng.pool.available == 20_000 and not eng.has_work()


def test_token_budget_and_max_seqs_are_respected() -> None:
    rec = RecordingModel()
    eng = Engine(rec, EngineConfig(max_num_seqs=8, max_num_batched_tokens=512, kv_blocks=20_000, noise_sigma=0))
    run_virtual(eng, [SimRequest(str(i), 1000, 5, 0) for i in range(20)])
    assert max(load.tokens for load in rec.loads) == 512
    rec.loads.clear()
    run_virtual(eng, [SimRequest(f"short{i}", 10, 50, 0) for i in range(20)])
    assert max(load.seqs for load in rec.loads) == 8


def test_long_prompt_is_chunked_so_running_streams_keep_decoding() -> None:
    rec = RecordingModel()
    eng = Engine(rec, EngineConfig(max_num_batched_tokens=2048, kv_blocks=20_000, noise_sigma=0))
    streams = [SimRequest(f"s{i}", 100, 200, 0) for i in range(32)]
    big = SimRequest("big", 16_000, 1, arrival_ns=500_000_000)
    run_virtual(eng, [*streams, big])
    # The 16k prefill runs as 8 chunks of ~2,016 tokens beside the 32 decodes; the streams emit a
    # token in every one of those steps, so their gap grows by about one chunk's time, never by
    # the whole prefill.
    gaps = np.diff(streams[0].token_ns) / 1e6
    chunk_ms = PERF.step_seconds(StepLoad(tokens=2048, seqs=33, decodes=32, decode_context=32 * 200,
                                          prefill_cached=14_000, prefill_attn=2016 * 15_000)) * 1e3
    whole_ms = PERF.step_seconds(StepLoad(tokens=16_000, seqs=1, prefill_attn=16_000 * 8_000)) * 1e3
    assert gaps.max() <= chunk_ms * 1.05
    assert gaps.max() < whole_ms / 4
    after_big = np.diff(streams[0].token_ns)[np.array(streams[0].token_ns[1:]) > big.arrival_ns] / 1e6
    assert sum(1 for g in after_big if g > 3 * np.median(gaps)) == 8


def test_kv_exhaustion_queues_then_preempts_and_still_completes() -> None:
    eng = engine(kv_blocks=400)  # 6,400 tokens of KV
    reqs = [SimRequest(str(i), 1000, 400, 0) for i in range(12)]
    for r in reqs:
        eng.add(r)
    first = eng.schedule(0)
    eng.complete(first, first.duration_ns)
    # Admission stops when KV is short: the rest wait, nothing is preempted yet.
    assert len(eng.waiting) >= 6 and eng.num_preemptions == 0
    run_virtual(eng, [])
    assert eng.num_preemptions > 0
    assert all(len(r.token_ns) == 400 for r in reqs)
    assert eng.pool.available == 400
    # What /metrics counts: every token once, and every prompt once, however often it was prefilled again.
    assert (eng.tokens.generation, eng.tokens.prompt) == (12 * 400, 12 * 1000)


def test_a_preempted_request_is_counted_once_by_the_prefix_cache() -> None:
    """vLLM leaves a preempted request's second lookup out of its prefix-cache counters; a thrashing
    simulator once reported more hit tokens than prompt tokens sent."""
    eng = engine(kv_blocks=400, prefix_caching=True)
    shared = make_text(512, 1).split()
    reqs = [SimRequest(str(i), 1000, 400, 0, block_hashes=block_hashes(shared + make_text(488, 10 + i).split()))
            for i in range(12)]
    run_virtual(eng, reqs)
    assert eng.num_preemptions > 0
    assert eng.pool.query_tokens == 12 * 999  # each prompt looked up once (its last token is always computed)
    assert eng.pool.hit_tokens <= eng.pool.query_tokens
    assert all(r.cached_tokens <= 512 for r in reqs) and sum(r.cached_tokens > 0 for r in reqs) >= 6


def test_abort_frees_slot_and_blocks_at_once() -> None:
    eng = engine()
    a, b = SimRequest("a", 500, 100, 0), SimRequest("b", 500, 100, 0)
    eng.add(a)
    eng.add(b)
    step = eng.schedule(0)
    eng.complete(step, step.duration_ns)
    used = eng.pool.used
    eng.abort(a)
    assert a not in eng.running and eng.pool.used < used
    eng.abort(b)
    assert eng.pool.available == 20_000 and not eng.has_work()


def test_itl_flat_at_low_batch_then_rising() -> None:
    def itl_ms(batch: int) -> float:
        reqs = [SimRequest(str(i), 1000, 50, 0) for i in range(batch)]
        run_virtual(engine(), reqs)
        return float(np.median(np.diff(reqs[0].token_ns[10:])) / 1e6)

    one, sixteen, two_fifty_six = itl_ms(1), itl_ms(16), itl_ms(256)
    assert sixteen / one < 1.25
    assert two_fifty_six / one > 2.0


def test_noise_is_seeded() -> None:
    def run(seed: int) -> list[int]:
        req = SimRequest("x", 100, 20, 0)
        run_virtual(Engine(PERF, EngineConfig(kv_blocks=1000, seed=seed)), [req])
        return req.token_ns

    assert run(1) == run(1)
    assert run(1) != run(2)


def _words(n: int, seed: int) -> list[str]:
    return make_text(n, seed).split()


def test_prefix_cache_hit_skips_the_shared_prefill() -> None:
    eng = engine(prefix_caching=True)
    shared = _words(2048, 1)
    first = SimRequest("a", 2048 + 16, 4, 0, block_hashes=block_hashes(shared + _words(16, 2)))
    second = SimRequest("b", 2048 + 16, 4, 10**9, block_hashes=block_hashes(shared + _words(16, 3)))
    cold = SimRequest("c", 2048 + 16, 4, 2 * 10**9, block_hashes=block_hashes(_words(2064, 4)))
    run_virtual(eng, [first, second, cold])
    ttft = {r.request_id: r.token_ns[0] - r.arrival_ns for r in (first, second, cold)}
    assert ttft["b"] < ttft["a"] / 3  # only the 16 unshared tokens are prefilled
    assert ttft["c"] == pytest.approx(ttft["a"], rel=0.05)
    assert eng.pool.hit_tokens == 2048
    assert eng.pool.available == eng.pool.total  # everything released, cached blocks evictable


def test_identical_prompt_still_computes_its_last_token() -> None:
    eng = engine(prefix_caching=True)
    words = _words(160, 5)
    reqs = [SimRequest(str(i), 160, 2, i * 10**9, block_hashes=block_hashes(words)) for i in range(2)]
    run_virtual(eng, reqs)
    assert eng.pool.hit_tokens == 144  # 9 of 10 blocks: the last block is recomputed for its logits
    assert all(len(r.token_ns) == 2 for r in reqs)


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 600), st.integers(1, 80), st.integers(0, 3)), min_size=1, max_size=25),
    kv_blocks=st.integers(60, 400),
    caching=st.booleans(),
)
def test_block_accounting_never_leaks(lengths: list[tuple[int, int, int]], kv_blocks: int, caching: bool) -> None:
    eng = Engine(PERF, EngineConfig(max_num_batched_tokens=512, kv_blocks=kv_blocks, noise_sigma=0,
                                    prefix_caching=caching))
    prefixes = [_words(600, s) for s in range(4)]
    reqs = [SimRequest(str(i), p, o, i * 5_000_000, block_hashes=block_hashes(prefixes[k][:p] + _words(o, i)))
            for i, (p, o, k) in enumerate(lengths) if blocks_for(p + o) <= kv_blocks]
    run_virtual(eng, reqs)
    assert all(len(r.token_ns) == r.output_tokens for r in reqs)
    assert eng.pool.available == kv_blocks and eng.pool.free >= 0
