"""The step engine's own cost in virtual time (no network, no clock), on an H100's Llama-3.1-8B:

- whole runs: 256 and 1,024 answers of the same seeded lengths, best of three, as engine tokens a second;
- a step's bookkeeping (issue 67): 256 and 1,024 sequences decoding together, the time `schedule` + `complete`
  take a step (the modelled time is not waited: this is what the simulator's own loop costs), best of three.

Run it against two commits back to back (PYTHONPATH=<worktree>) when the step loop changes.

    python bench/engine_steps.py
"""

from __future__ import annotations

import time

from harness.config.simulator import SimulatorConfig
from harness.sim.build import build_engine
from harness.sim.engine import SimRequest
from harness.sim.virtual import run_virtual

STEPS = 300


def whole_runs() -> None:
    for n in (256, 1024):
        best, tokens = float("inf"), 0
        for _ in range(3):
            engine = build_engine(SimulatorConfig(noise_sigma=0.03, prefix_caching=False))
            reqs = [SimRequest(str(i), 256, 200 + (i * 37) % 100, i * 100_000) for i in range(n)]
            began = time.perf_counter()
            run_virtual(engine, reqs)
            best = min(best, time.perf_counter() - began)
            tokens = sum(len(r.token_ns) for r in reqs)
        print(f"{n:>5} answers: {best * 1e3:.0f} ms, {tokens / best / 1e3:.0f}k engine tokens/s")


def step_seconds(n: int, prefix_caching: bool) -> float:
    """One step of `n` running decodes, schedule and complete, averaged over STEPS steps once all are decoding."""
    engine = build_engine(SimulatorConfig(noise_sigma=0.03, prefix_caching=prefix_caching, max_num_seqs=2048,
                                          max_num_batched_tokens=8192))
    for i in range(n):
        engine.add(SimRequest(str(i), 256, 10**6, 0, block_hashes=list(range(i * 16, i * 16 + 16))))
    now = 0
    while engine.waiting or any(r.generated == 0 for r in engine.running):
        step = engine.schedule(now)
        now += step.duration_ns
        engine.complete(step, now)
    began = time.perf_counter()
    for _ in range(STEPS):
        step = engine.schedule(now)
        now += step.duration_ns
        engine.complete(step, now)
    return (time.perf_counter() - began) / STEPS


def bookkeeping() -> None:
    for caching in (False, True):
        for n in (256, 1024):
            best = min(step_seconds(n, caching) for _ in range(3))
            print(f"{n:>5} sequences decoding, prefix caching {'on' if caching else 'off'}: {best * 1e6:.0f} µs a "
                  f"step, {best / n * 1e9:.0f} ns a sequence")


if __name__ == "__main__":
    whole_runs()
    bookkeeping()
