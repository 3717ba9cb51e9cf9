"""How often `harness sim twin` condemns a twin that is right, and how often it passes one that is wrong.

A/A (false alarms): TRIALS runs of the command as a user types it, each against a fresh bundled simulator of a
hidden device (tests/hidden_gpu.py: 400 TFLOP/s, 3.2 TB/s, Llama-3.1-8B, 4 slots, 3% step noise) — a twin of the
simulator is as right as a twin gets, so every exit 99 is a false alarm. With --hog a busy loop shares the
harness's core (the simulator on the other): a loaded shared runner; --hog-nice 10, one that mostly yields.
Real case (misses): --wrong K runs where the fitting runs are made against the hidden device and the held-out
loads against one SLOWER times slower (its compute and bandwidth scaled down): the twin is then wrong by about
that much on every held-out figure, and a verdict of "holds" is a miss. A verdict of "no verdict" (exit 5: the
client limited a run, so the misses may be its own) is neither an alarm nor a pass; counted apart.

Bounded: each run is one `sim twin` with --budget 4m (about a minute here); traffic to 127.0.0.1 only.

    .venv/bin/python bench/twin_verdict.py [--trials 10] [--wrong 5] [--hog [--hog-nice 10]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from harness.config.scenario import parse_scenario
from harness.devices.catalogue import build_model, load_presets
from harness.devices.fitted import FittedAccelerator, FittedModel
from harness.devices.step import StepLoad
from harness.run.display import Display
from harness.run.target import target
from harness.twin.make import Measured, engine_info, judge, make_run, measure
from harness.voice import QUIET

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from compare_power import PIN_SIM, busy_loop, hog_options, interval  # noqa: E402

from tests.hidden_gpu import HIDDEN  # noqa: E402

SLOTS, SLOWER = 4, 1.3
SLOW = f"  hidden-slow: {{tflops: {400 / SLOWER:g}, hbm_tbps: {3.2 / SLOWER:g}, memory_gb: 24}}\n"


def simulator(presets: Path, accelerator: str, seed: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*PIN_SIM, sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--presets",
                             str(presets), "--accelerator", accelerator, "--max-num-seqs", str(SLOTS),
                             "--max-model-len", "16384", "--seed", str(seed)],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=15)


def aa_run(tmp: Path, presets: Path, k: int) -> tuple[int, list[str]]:
    """One `sim twin` as a user runs it: its exit code and what it named when it did not hold."""
    proc, url = simulator(presets, "hidden-gpu", 100 + k)
    try:
        done = subprocess.run([sys.executable, "-m", "harness", "sim", "twin", url, "--slots", str(SLOTS), "--budget",
                               "4m", "--out", str(tmp / f"aa{k}.yaml"), "--json"], capture_output=True, text=True,
                              timeout=600)
    finally:
        stop(proc)
    if done.returncode not in (0, 5, 99):
        raise SystemExit(f"sim twin exited {done.returncode}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    named = [f"{f['load']} {f['figure']} {f['error']:+.0%} (±{f['tolerance']:.0%})" for f in result["held_out"]
             if not f["holds"]] + [f["code"] for f in result["findings"]]
    return done.returncode, [*named, prompt_errors(FittedAccelerator(**result["accelerator"]), presets)]


def prompt_errors(twin: FittedAccelerator, presets: Path) -> str:
    """The twin's price of a lone prompt against the hidden device's, at the lengths the design fits on."""
    load_presets(presets)
    hidden = build_model("hidden-gpu", "llama-3.1-8b")
    errors = []
    for n in (128, 512, 1024):
        load = StepLoad(tokens=n, seqs=1, decodes=0, prefill_attn=n * n / 2)
        errors.append(f"{n}: {FittedModel(twin).step_seconds(load) / hidden.step_cost(load).seconds - 1:+.1%}")
    return "prompt alone " + ", ".join(errors)


def wrong_run(tmp: Path, presets: Path, k: int) -> str:
    """Fitted on the hidden device, held out on a slower one: the verdict ("holds" is a miss)."""
    return judge(asyncio.run(wrong_runs(tmp, presets, k)), tmp / f"wrong{k}.yaml", "twin").verdict


async def wrong_runs(tmp: Path, presets: Path, k: int) -> Measured:
    """The runs of one `sim twin`, the held-out ones made again against the slower device."""
    scenario = parse_scenario({"name": "twin", "phases": [{"name": "p", "load": {
        "type": "concurrency", "concurrency": 1, "requests": 1}}]}, "bench")
    proc, url = simulator(presets, "hidden-gpu", 200 + k)
    work = tmp / f"wrong{k}"
    try:
        async with target(scenario, url=url, model=None, api=None, api_key=None) as (endpoint, _):
            made = await measure(endpoint, await engine_info(endpoint), SLOTS, 240.0, work, "server", QUIET)
    finally:
        stop(proc)
    proc, url = simulator(presets, "hidden-slow", 300 + k)
    dirs = dict(made.dirs)
    try:
        async with target(scenario, url=url, model=None, api=None, api_key=None) as (endpoint, _):
            with (work / "slow.log").open("w", encoding="utf-8") as log:
                for i, spec in enumerate(made.plan.role("held")):
                    dirs[spec.name] = await make_run(spec, endpoint, work / f"slow-{i:02d}-{spec.name}", "server",
                                                 Display(log))
    finally:
        stop(proc)
    return replace(made, dirs=dirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--wrong", type=int, default=5)
    args = hog_options(parser).parse_args()
    busy = busy_loop(args)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            tmp = Path(workdir)
            presets = tmp / "hidden.yaml"
            presets.write_text(HIDDEN + SLOW)
            codes, named = Counter[int](), Counter[str]()
            for k in range(args.trials):
                code, said = aa_run(tmp, presets, k)
                codes[code] += 1
                named.update(said[:-1])
                print(f"A/A {k + 1}/{args.trials}: exit {code}{': ' + '; '.join(said) if said else ''}", flush=True)
            alarms = codes[99]
            print(f"false alarms (exit 99): {alarms} of {args.trials} ({interval(alarms, args.trials)}); no verdict "
                  f"(exit 5, the client limited a run): {codes[5]}; holds (exit 0): {codes[0]}; named: "
                  f"{dict(named.most_common())}", flush=True)
            verdicts = Counter[str]()
            for k in range(args.wrong):
                judged = wrong_run(tmp, presets, k)
                verdicts[judged] += 1
                print(f"{SLOWER:g}× slower held-out server {k + 1}/{args.wrong}: {judged}", flush=True)
            if args.wrong:
                caught = verdicts["does not hold"]
                print(f"caught: {caught} of {args.wrong} ({interval(caught, args.wrong)}); {dict(verdicts)}")
    finally:
        if busy is not None:
            busy.kill()


if __name__ == "__main__":
    main()
