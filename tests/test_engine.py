"""The step engine in virtual time: batching, budgets, chunked prefill, KV exhaustion."""

import numpy as np

from harness.sim.engine import Engine, EngineConfig, SimRequest, run_virtual
from harness.sim.perfmodel import RooflineModel, StepLoad
from harness.sim.presets import ACCELERATORS, MODELS

PERF = RooflineModel(ACCELERATORS["h100-sxm"], MODELS["llama-3.1-8b"])


def engine(**kw: int | float) -> Engine:
    cfg = {"kv_blocks": 20_000, "noise_sigma": 0.0, **kw}
    return Engine(PERF, EngineConfig(**cfg))  # type: ignore[arg-type]


class RecordingModel:
    """Wraps the roofline model and keeps every step's load."""

    def __init__(self) -> None:
        self.loads: list[StepLoad] = []

    def step_seconds(self, load: StepLoad) -> float:
        self.loads.append(load)
        return PERF.step_seconds(load)


def test_every_request_gets_exactly_its_tokens_in_order() -> None:
    eng = engine()
    reqs = [SimRequest(str(i), 100 + i, 20 + i, arrival_ns=i * 1_000_000) for i in range(30)]
    run_virtual(eng, reqs)
    for r in reqs:
        assert len(r.token_ns) == r.output_tokens
        assert r.finished and np.all(np.diff(r.token_ns) > 0)
        assert r.token_ns[0] > r.arrival_ns
    assert eng.free_blocks == 20_000 and not eng.has_work()


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
    streams = [SimRequest(f"s{i}", 100, 200, 0) for i in range(8)]
    big = SimRequest("big", 16_000, 1, arrival_ns=500_000_000)
    run_virtual(eng, [*streams, big])
    # The 16k prefill runs as 8 chunks of 2,048 tokens; the streams emit a token in every one of
    # them, so their gap grows by about one chunk's time, never by the whole prefill.
    gaps = np.diff(streams[0].token_ns) / 1e6
    chunk_ms = PERF.step_seconds(StepLoad(tokens=2048, seqs=9, decode_context=8 * 200,
                                          prefill_cached=14_000, prefill_attn=2048 * 15_000)) * 1e3
    whole_ms = PERF.step_seconds(StepLoad(tokens=16_000, seqs=1, prefill_attn=16_000 * 8_000)) * 1e3
    assert gaps.max() <= chunk_ms * 1.05
    assert gaps.max() < whole_ms / 4
    assert sum(1 for g in gaps if g > 3 * np.median(gaps)) == 8


def test_kv_exhaustion_queues_then_preempts_and_still_completes() -> None:
    eng = engine(kv_blocks=400)  # 6,400 tokens of KV
    reqs = [SimRequest(str(i), 1000, 400, 0) for i in range(12)]
    run_virtual(eng, reqs)
    assert eng.num_preemptions > 0
    assert all(len(r.token_ns) == 400 for r in reqs)
    assert eng.free_blocks == 400


def test_abort_frees_slot_and_blocks_at_once() -> None:
    eng = engine()
    a, b = SimRequest("a", 500, 100, 0), SimRequest("b", 500, 100, 0)
    eng.add(a)
    eng.add(b)
    step = eng.schedule(0)
    eng.complete(step, step.duration_ns)
    used = 20_000 - eng.free_blocks
    eng.abort(a)
    assert a not in eng.running and 20_000 - eng.free_blocks < used
    eng.abort(b)
    assert eng.free_blocks == 20_000 and not eng.has_work()


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
