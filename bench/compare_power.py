"""The regression gate over real HTTP: power and false alarms of `harness compare` at its default tolerances.

Each run: Poisson 8 req/s, 100 requests of 256 → 64 tokens, against `harness sim serve` on loopback (H100,
Llama-3.1-8B, engine timing), a fresh simulator per run. False alarms: TRIALS pairs of runs that differ only
in their seeds (scenario and simulator); power: TRIALS pairs where the current side runs on an accelerator
whose compute and bandwidth are scaled down 1.27× (decode steps, and so ITL, about 20% slower). A pair is
flagged when any metric's verdict is "regression"; a slow pair is caught when ITL p50 or TPOT p50 is.
Bounded: 3 × TRIALS runs of about 15 s each; traffic to 127.0.0.1 only.

    .venv/bin/python bench/compare_power.py [--trials 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.client.backend import Endpoint
from harness.config.presets import ACCELERATORS, Accelerator
from harness.config.scenario import parse_scenario
from harness.records import read_records
from harness.run.runner import run_scenario
from harness.stats.compare import DEFAULT_TOLERANCES, Block, blocks, bootstrap

SLOWER = 1.27


def _presets(tmp: Path) -> Path:
    h = ACCELERATORS["h100-sxm"]
    assert isinstance(h, Accelerator)
    path = tmp / "slower.yaml"
    path.write_text(f"accelerators:\n  h100-slower: {{tflops: {h.tflops / SLOWER}, hbm_tbps: {h.hbm_tbps / SLOWER}, "
                    f"memory_gb: {h.memory_gb}, fp8_tflops: {(h.fp8_tflops or h.tflops) / SLOWER}}}\n")
    return path


def one_run(tmp: Path, name: str, seed: int, accelerator: str, presets: Path) -> list[Block]:
    sim = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed", str(seed),
                            "--accelerator", accelerator, "--presets", str(presets)],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert sim.stdout is not None
        info = json.loads(sim.stdout.readline())
        scenario = parse_scenario({
            "name": "gate", "seed": seed, "workload": {"prompt_tokens": 256, "output_tokens": 64},
            "endpoint": {"scrape_interval_s": 0},
            "phases": [{"name": "open", "load": {"type": "poisson", "rate": 8, "requests": 100}}]}, "bench")
        result = asyncio.run(run_scenario(scenario, Endpoint(info["url"], info["model"]), tmp / name))
    finally:
        sim.terminate()
        sim.communicate(timeout=15)
    window = result.summary.phases[0].window
    return blocks(list(read_records(tmp / name / "requests.jsonl")), window.start_ns, window.end_ns)


def flags(base: list[Block], current: list[Block]) -> list[str]:
    return [m for m, tol in DEFAULT_TOLERANCES.items() if bootstrap(m, base, current, tol).verdict == "regression"]


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a proportion k / n."""
    z, p = 1.96, k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (
        1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        tmp = Path(workdir)
        presets = _presets(tmp)
        bases = [one_run(tmp, f"base{k}", 100 + k, "h100-sxm", presets) for k in range(args.trials + 1)]
        alarms = [flags(bases[k], bases[k + 1]) for k in range(args.trials)]
        print(f"false alarms: {sum(bool(a) for a in alarms)} of {args.trials} seed-only pairs "
              f"(95% interval {wilson(sum(bool(a) for a in alarms), args.trials)[0]:.0%}–"
              f"{wilson(sum(bool(a) for a in alarms), args.trials)[1]:.0%}); flagged: {[a for a in alarms if a]}",
              flush=True)
        caught, changes = 0, []
        for k in range(args.trials):
            slow = one_run(tmp, f"slow{k}", 300 + k, "h100-slower", presets)
            flagged = flags(bases[k], slow)
            caught += "itl_p50" in flagged or "tpot_p50" in flagged
            changes.append(bootstrap("itl_p50", bases[k], slow, 0.05).change or 0.0)
        low, high = wilson(caught, args.trials)
        print(f"power: {caught} of {args.trials} slower decodes flagged (95% interval {low:.0%}–{high:.0%}); "
              f"ITL p50 change, mean {sum(changes) / len(changes):+.1%}, range {min(changes):+.1%} to "
              f"{max(changes):+.1%}", flush=True)


if __name__ == "__main__":
    main()
