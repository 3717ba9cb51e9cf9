"""The step engine's own cost in virtual time (no network, no clock): 256 and 1,024 running answers of the same
seeded lengths on an H100's Llama-3.1-8B, best of three, as engine tokens a second. Run it against two commits
back to back (PYTHONPATH=<worktree>) when the step loop changes.

    python bench/engine_steps.py
"""

from __future__ import annotations

import time

from harness.config.simulator import SimulatorConfig
from harness.sim.build import build_engine
from harness.sim.engine import SimRequest
from harness.sim.virtual import run_virtual


def main() -> None:
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


if __name__ == "__main__":
    main()
