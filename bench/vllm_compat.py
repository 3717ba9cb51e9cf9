"""Before and after: the experiments issues 17 and 32 quote, run through the simulator's engine in virtual time.

"before" is the simulator as it was: vLLM 0.11's scheduling rules (`scheduler_compat: "0.11"`, which also
turns async scheduling off) and 256 sequences / 8,192 tokens on every device. "after" is the default:
vLLM 0.33's rules and its batch defaults for the device. Both take the KV capacity of the current memory
model, so the figures differ only by what the scheduler does. No network; about two minutes.

`--only lookahead`: issue 32's experiments alone — async scheduling's lookahead off ("before": an arrival during
a step joins the next one) and on ("after", vLLM 0.33: the one after next), all else equal; and the step-time
overlap itself (host time hidden under the device's, or added to it) at a small and a large batch, beside the
public figures it can be held to.

    python bench/vllm_compat.py [--mooncake-requests 3000] [--only lookahead]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.config.simulator import SimulatorConfig
from harness.sim.build import build_engine
from harness.sim.engine import Engine, SimRequest
from harness.sim.kvcache import BLOCK_TOKENS, block_hashes
from harness.sim.virtual import VirtualRun, run_virtual
from harness.tokens import make_text
from harness.workload.traces import read_mooncake

MOONCAKE = Path(__file__).resolve().parents[1] / "scenarios/traces/mooncake_conversation_trace.jsonl.gz"
MOONCAKE_BLOCK = 512  # tokens per hash_id

Row = tuple[str, str, str, str]


def config(era: str, **kw: object) -> SimulatorConfig:
    older = {"scheduler_compat": "0.11", "max_num_seqs": 256, "max_num_batched_tokens": 8192} if era == "before" else {}
    return SimulatorConfig.model_validate({"noise_sigma": 0.0, **older, **kw})


def closed_loop(engine: Engine, users: int, prompt: int, out: int, seconds: float) -> tuple[float, float]:
    """`users` users each sending the next request when the last one ends, for `seconds` of virtual time:
    TTFT p50 (s) and output tokens/s."""
    run, ids, done = VirtualRun(engine), itertools.count(), []
    end_ns = int(seconds * 1e9)

    def send(at_ns: int) -> None:
        run.submit(SimRequest(str(next(ids)), prompt, out, at_ns))

    def on_finish(req: SimRequest) -> None:
        done.append(req)
        if run.now < end_ns:
            send(run.now)

    for _ in range(users):
        send(0)
    run.run(on_finish)
    ttft = float(np.median([r.token_ns[0] - r.arrival_ns for r in done])) / 1e9
    return ttft, len(done) * out / (run.now / 1e9)


def many_users(era: str) -> list[Row]:
    ttft, rate = closed_loop(build_engine(config(era)), 768, 128, 256, 60)
    return [("768 closed-loop users, 128 in / 256 out, H100: TTFT p50", era, f"{ttft * 1e3:,.0f} ms", ""),
            ("… output tokens/s", era, f"{rate:,.0f}", "")]


def long_prompt(era: str) -> list[Row]:
    run = VirtualRun(build_engine(config(era, accelerator="a100-80g")))
    decoders = [SimRequest(f"d{i}", 128, 200, 0) for i in range(64)]
    for r in decoders:
        run.submit(r)
    run.submit(SimRequest("long", 32_000, 1, 100_000_000))
    run.run()
    gap = max(float(np.max(np.diff(r.token_ns))) for r in decoders) / 1e6
    return [("32k prompt among 64 decoding streams, A100: worst ITL", era, f"{gap:,.0f} ms", "")]


def mooncake_hashes(row_ids: tuple[int, ...], tokens: int) -> list[int]:
    """Chained 16-token block hashes of a prompt made of the trace's 512-token blocks."""
    out, prev = [], 0
    for i in range(tokens // BLOCK_TOKENS):
        prev = hash((prev, row_ids[i * BLOCK_TOKENS // MOONCAKE_BLOCK], i))
        out.append(prev)
    return out


def mooncake(era: str, requests: int) -> list[Row]:
    """The Mooncake conversation trace on one H100 at 4× its pace: memory pressure and shared prefixes."""
    trace = read_mooncake(MOONCAKE)
    reqs = [SimRequest(str(i), r.input_tokens, r.output_tokens, int(r.arrival_s * 1e9 / 4),
                       block_hashes=mooncake_hashes(r.hash_ids or (i,), r.input_tokens))
            for i, r in enumerate(trace.rows[:requests])]
    eng = build_engine(config(era, gpu_memory_utilization=0.5))
    run_virtual(eng, reqs)
    pool = eng.pool
    return [(f"Mooncake conversation trace, {requests:,} requests at 4× pace, H100 at 0.5 memory: prefix hit rate",
             era, f"{pool.hit_tokens / pool.query_tokens:.1%}", f"{pool.hit_tokens / 1e6:.1f} M of "
             f"{pool.query_tokens / 1e6:.1f} M tokens; {sum(r.prompt_tokens for r in reqs) / 1e6:.1f} M sent"),
            ("… preemptions", era, f"{eng.num_preemptions:,}", "")]


def words(n: int, seed: int) -> list[str]:
    return make_text(n, seed).split()


def kv_pressure(era: str) -> list[Row]:
    """96 users, nothing shared, KV short enough to preempt."""
    reqs = [SimRequest(str(i), 1200, 300, i * 1_000_000, block_hashes=block_hashes(words(1200, 500 + i)))
            for i in range(96)]
    eng = build_engine(config(era, gpu_memory_utilization=0.25))
    run_virtual(eng, reqs)
    pool = eng.pool
    return [("96 users, no shared text, under KV pressure: prefix hit rate", era,
             f"{pool.hit_tokens / max(pool.query_tokens, 1):.1%}", ""),
            ("… preemptions", era, f"{eng.num_preemptions:,}", "")]


def shared_burst(era: str) -> list[Row]:
    shared = words(3000, 1)
    reqs = [SimRequest(str(i), 3016, 4, 0, block_hashes=block_hashes(shared + words(16, 100 + i))) for i in range(64)]
    run_virtual(build_engine(config(era)), reqs)
    ttft = float(np.median([r.token_ns[0] for r in reqs])) / 1e6
    return [("64 requests at once sharing a 3,000-token prompt, H100: TTFT p50", era, f"{ttft:,.0f} ms", "")]


def async_overlap(era: str) -> list[Row]:
    _, rate = closed_loop(build_engine(config(era, max_num_seqs=256)), 256, 128, 256, 30)
    return [("256 closed-loop users, H100, 256 sequences either way: output tokens/s", era, f"{rate:,.0f}", "")]


def _lookahead(era: str, **kw: object) -> Engine:
    engine = build_engine(config("after", **kw))
    return Engine(engine.model, dataclasses.replace(engine.config, async_scheduling=era == "after"))


def poisson(engine: Engine, rate: float, prompt: int, out: int, n: int, seed: int = 7) -> float:
    """`n` Poisson arrivals at `rate` req/s: TTFT p50 in ms."""
    at = np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n)) * 1e9
    reqs = [SimRequest(str(i), prompt, out, int(t)) for i, t in enumerate(at)]
    run_virtual(engine, reqs)
    return float(np.median([r.token_ns[0] - r.arrival_ns for r in reqs])) / 1e6


def lookahead(era: str) -> list[Row]:
    label = {"before": "lookahead off", "after": "lookahead on"}[era]
    ttft, rate = closed_loop(_lookahead(era), 768, 128, 256, 60)
    rows = [("768 closed-loop users, 128 in / 256 out, H100: TTFT p50", label, f"{ttft * 1e3:,.0f} ms",
             f"{rate:,.0f} output tokens/s")]
    for r in (8, 20):
        rows.append((f"Poisson {r} req/s, 1,024 in / 256 out, Llama-3.1-8B on H100: TTFT p50", label,
                     f"{poisson(_lookahead(era), r, 1024, 256, 600):,.1f} ms", ""))
    ttft70 = poisson(_lookahead(era, model="llama-3.1-70b", tp=2), 1, 1024, 256, 120)
    rows.append(("Poisson 1 req/s, 1,024 in / 256 out, Llama-3.1-70B tp 2 on H100: TTFT p50", label,
                 f"{ttft70:,.1f} ms", ""))
    return rows


def overlap(era: str) -> list[Row]:
    """Output tokens/s with the host's step time added (before) or hidden under the device's (after)."""
    rows = []
    for users, what in ((3, "3 users (a small batch)"), (256, "256 users (a full batch)")):
        cfg = {"model": "llama-3.1-8b", "dtype": "fp8", "async_scheduling": era == "after", "max_num_seqs": 256}
        _, rate = closed_loop(build_engine(config("after", **cfg)), users, 230, 120, 30)
        rows.append((f"Llama-3.1-8B fp8 on H100, {what}, 230 in / 120 out: output tokens/s",
                     "async off" if era == "before" else "async on", f"{rate:,.0f}", ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mooncake-requests", type=int, default=3000)
    parser.add_argument("--only", choices=["lookahead"], help="only issue 32's experiments")
    args = parser.parse_args()
    experiments: list[Callable[[str], list[Row]]] = [
        many_users, long_prompt, lambda era: mooncake(era, args.mooncake_requests), kv_pressure, shared_burst,
        async_overlap, lookahead, overlap]
    if args.only == "lookahead":
        experiments = [lookahead, overlap]
    print("| experiment | simulator | value | detail |\n|---|---|---|---|")
    for experiment in experiments:
        start = time.perf_counter()
        for era in ("before", "after"):
            for row in experiment(era):
                print("| " + " | ".join(row) + " |", flush=True)
        print(f"<!-- {time.perf_counter() - start:.1f} s -->", flush=True)


if __name__ == "__main__":
    main()
