"""The regression gate over real HTTP: power and false alarms of `harness compare` at its default tolerances.

Each run: Poisson 8 req/s, 100 requests of 256 → 64 tokens, against `harness sim serve` on loopback (H100,
Llama-3.1-8B, engine timing), a fresh simulator per run. False alarms: TRIALS pairs of runs that differ only
in their seeds (scenario and simulator); power: TRIALS pairs where the current side runs on an accelerator
whose compute and bandwidth are scaled down 1.27× (decode steps, and so ITL, about 20% slower). A pair is
flagged when any metric's verdict is "regression"; a slow pair is caught when ITL p50 or TPOT p50 is. As in
`harness compare`, a pair where the client limited either run is "untrusted" (never flagged) and counted apart.
With --hog, a busy loop shares the harness's core (harness on the first core, simulators on the last): a loaded
CI runner. Bounded: 3 × TRIALS runs of about 15 s each; traffic to 127.0.0.1 only.

    .venv/bin/python bench/compare_power.py [--trials 20] [--hog [--hog-nice 10]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.client.backend import Endpoint
from harness.config.metric_registry import DEFAULT_TOLERANCES
from harness.config.scenario import parse_scenario
from harness.devices.catalogue import gpu
from harness.records_read import read_records
from harness.run.runner import run_scenario
from harness.stats.compare import Block, blocks, bootstrap

SLOWER = 1.24  # decode steps (ITL) about 20% slower


def _presets(tmp: Path) -> Path:
    h = gpu("h100-sxm")
    path = tmp / "slower.yaml"
    path.write_text(f"accelerators:\n  h100-slower: {{tflops: {h.tflops / SLOWER}, hbm_tbps: {h.hbm_tbps / SLOWER}, "
                    f"memory_gb: {h.memory_gb}, fp8_tflops: {(h.fp8_tflops or h.tflops) / SLOWER}, "
                    f"eta_mem: {h.eta_mem}}}\n")
    return path


Side = tuple[list[Block], bool]  # a run's blocks, and whether the client limited it
PIN_SIM: list[str] = []


def one_run(tmp: Path, name: str, seed: int, accelerator: str, presets: Path) -> Side:
    sim = subprocess.Popen([*PIN_SIM, sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed",
                            str(seed), "--accelerator", accelerator, "--presets", str(presets)],
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
    phase = result.summary.phases[0]
    cut = blocks(list(read_records(tmp / name / "requests.jsonl")), phase.window.start_ns, phase.window.end_ns)
    return cut, phase.client_limited


def raw_flags(base: Side, current: Side) -> list[str]:
    """The metrics the bootstrap alone calls regressions, whoever was late."""
    return [m for m, tol in DEFAULT_TOLERANCES.items()
            if bootstrap(m, base[0], current[0], tol).verdict == "regression"]


def flags(base: Side, current: Side) -> list[str] | None:
    """The metrics flagged as regressions; None: untrusted (the client limited a run), as compare says."""
    return None if base[1] or current[1] else raw_flags(base, current)


def hog(nice: int) -> subprocess.Popen[bytes]:
    """A busy loop on this process's core (the first), the simulators pinned to the last: a loaded runner. At
    nice 0 it takes half the core; niced, it yields most of it but still delays the harness's wake-ups."""
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cores[:1])
    PIN_SIM[:] = ["taskset", "-c", str(cores[-1])]
    return subprocess.Popen(["taskset", "-c", str(cores[0]), "nice", "-n", str(nice), sys.executable, "-c",
                             "while True: pass"])


def hog_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--hog and --hog-nice, as every bench of a busy machine takes them."""
    parser.add_argument("--hog", action="store_true", help="a busy loop on the harness's core")
    parser.add_argument("--hog-nice", type=int, default=0, help="the busy loop's nice value (default 0)")
    return parser


def busy_loop(args: argparse.Namespace) -> subprocess.Popen[bytes] | None:
    return hog(args.hog_nice) if args.hog else None


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a proportion k / n."""
    z, p = 1.96, k / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (
        1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)


def interval(k: int, n: int) -> str:
    if not n:
        return "none to judge"
    low, high = wilson(k, n)
    return f"95% interval {low:.0%}–{high:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    args = hog_options(parser).parse_args()
    busy = busy_loop(args)
    try:
        measure(args.trials)
    finally:
        if busy is not None:
            busy.kill()


def measure(trials: int) -> None:
    args = argparse.Namespace(trials=trials)
    with tempfile.TemporaryDirectory() as workdir:
        tmp = Path(workdir)
        presets = _presets(tmp)
        bases = [one_run(tmp, f"base{k}", 100 + k, "h100-sxm", presets) for k in range(args.trials + 1)]
        alarms = [flags(bases[k], bases[k + 1]) for k in range(args.trials)]
        judged = [a for a in alarms if a is not None]
        k = sum(bool(a) for a in judged)
        print(f"false alarms: {k} of {len(judged)} trusted seed-only pairs ({interval(k, len(judged))}); "
              f"untrusted (client limited): {len(alarms) - len(judged)}; "
              f"flagged: {[a for a in judged if a]}; runs client-limited: {sum(b[1] for b in bases)}; without the "
              f"untrusted rule {sum(bool(raw_flags(bases[k], bases[k + 1])) for k in range(args.trials))} of "
              f"{args.trials} pairs would be flagged", flush=True)
        caught, raw, untrusted, changes = 0, 0, 0, []
        for k in range(args.trials):
            slow = one_run(tmp, f"slow{k}", 300 + k, "h100-slower", presets)
            flagged = flags(bases[k], slow)
            untrusted += flagged is None
            caught += flagged is not None and ("itl_p50" in flagged or "tpot_p50" in flagged)
            raw += bool({"itl_p50", "tpot_p50"} & set(raw_flags(bases[k], slow)))
            changes.append(bootstrap("itl_p50", bases[k][0], slow[0], 0.05).change or 0.0)
        print(f"power: {caught} of {args.trials - untrusted} trusted slower decodes flagged "
              f"({interval(caught, args.trials - untrusted)}; untrusted {untrusted}; without the untrusted rule "
              f"{raw} caught); "
              f"ITL p50 change, mean {sum(changes) / len(changes):+.1%}, range {min(changes):+.1%} to "
              f"{max(changes):+.1%}", flush=True)


if __name__ == "__main__":
    main()
