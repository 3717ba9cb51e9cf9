"""Client fidelity and ceiling, with the parameters of the load-engine issue.

Fixed TTFT 50 ms and ITL 10 ms, 128 output tokens, the simulator writing every event on its own (as vLLM,
llama.cpp and TGI stream), at 1, 64, 256 and 1,024 concurrent streams (closed loop, users staggered over
one request's duration), then at 256 and 1,024 in lock-step (every user at once: waves that end and start
together), each for `--seconds`: the harness's reported TTFT, TPOT and per-chunk gaps minus the
simulator's ground truth for the same request ids. Then the ceiling: 64 streams of 512 tokens at zero
simulated delay, one event a write and a step's tokens a write, and the harness CPU per 1,000 streamed
tokens. Harness and simulator are pinned to separate cores. This is `harness calibrate` with those
settings; it also saves this machine's calibration.

With `--ceiling-only --harness-loop asyncio|uvloop`, only the two ceilings, the harness on the loop named (the
simulator stays on uvloop): how much the event loop itself weighs in the client's cost per token.

    .venv/bin/python bench/client_fidelity.py [--seconds 10] [--ceiling-only] [--harness-loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from harness import loop as event_loop
from harness.gctune import tune_for_timing
from harness.tools.calibrate import calibrate, render


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ceiling-only", action="store_true", help="only the ceilings, no fidelity levels")
    parser.add_argument("--harness-loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args()
    tune_for_timing()
    levels, lockstep = ([], ()) if args.ceiling_only else ([1, 64, 256, 1024], (256, 1024))
    run = event_loop.run if args.harness_loop == "uvloop" else asyncio.run
    with tempfile.TemporaryDirectory() as tmp:
        report = run(calibrate(levels, args.seconds, Path(tmp), lockstep_levels=lockstep))
    print(render(report))


if __name__ == "__main__":
    main()
