"""What the roofline law costs the simulator a step: microseconds a `step_cost` call for a dense and an MoE model
at 1, 64 and 256 decoding sequences, best of five (the simulator's step loop calls it once a step).

    .venv/bin/python bench/step_cost.py
"""

from __future__ import annotations

import timeit

from harness.devices.catalogue import build_model
from harness.devices.step import PerformanceModel, StepLoad

CALLS = 20_000


def main() -> None:
    loads = [StepLoad(tokens=b, seqs=b, decodes=b, decode_context=b * 1000) for b in (1, 64, 256)]
    for name, law in (("llama-3.1-70b tp 4", build_model("h100-sxm", "llama-3.1-70b", tp=4)),
                      ("mixtral-8x7b tp 2", build_model("h100-sxm", "mixtral-8x7b", tp=2)),
                      ("deepseek-v3 fp8 tp 8", build_model("h200", "deepseek-v3", tp=8))):
        def steps(law: PerformanceModel = law) -> None:
            for load in loads:
                law.step_cost(load)

        runs = timeit.repeat(steps, number=CALLS, repeat=5)
        print(f"{name}: {min(runs) / CALLS / len(loads) * 1e6:.2f} µs a step_cost")


if __name__ == "__main__":
    main()
