"""How often the shipped nightly job goes red, or ends with no verdict, when nothing changed — and how often it
catches a server 10% and 20% slower. `docker/ci/nightly.sh` as shipped (scenarios/nightly.yaml), night after
night on one history, against a bundled simulator (H100, Llama-3.1-8B) started fresh each night on the last
core, the harness on the first.

- A/A: `--aa` nights on the usual simulator; the first starts the baseline, every later one is judged.
- slower: from the A/A history's end, `--slow` nights each on a simulator whose roofline (compute and memory
  bandwidth) is slower by the factor that makes a decode step ~10% slower at this load (and `--slower` nights at
  ~20%); each from a copy of the A/A history, so one slow night never becomes another's baseline.

A night's outcome is the script's exit: 0 green, 99 red, 5 no verdict (after its retries), anything else an error.
The measured ITL p50 change of the slow nights is printed beside, so "10% slower" is a measured figure.

    .venv/bin/python bench/nightly_aa.py [--repeat 3] [--aa 30] [--slow 10] [--slower 10] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

DEFAULT = "h100-sxm"  # the bundled simulator's own accelerator: served without presets

ROOT = Path(__file__).resolve().parents[1]
H100 = {"tflops": 989.0, "hbm_tbps": 3.35, "memory_gb": 80.0}
# Roofline terms slower by k: a decode step at this load (t_m ≈ 6.0 ms of 8.35) then takes ~10% / ~20% longer.
SLOWER = {"slower10": 1.139, "slower20": 1.278}


def _presets(folder: Path) -> Path:
    path = folder / "slower.yaml"
    accelerators = {name: {"tflops": H100["tflops"] / k, "hbm_tbps": H100["hbm_tbps"] / k,
                           "memory_gb": H100["memory_gb"]} for name, k in SLOWER.items()}
    path.write_text(yaml.safe_dump({"accelerators": accelerators}), encoding="utf-8")
    return path


def _serve(accelerator: str, presets: Path, seed: int) -> tuple[subprocess.Popen[str], str]:
    last = str(sorted(os.sched_getaffinity(0))[-1])
    args = [sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed", str(seed)]
    if accelerator != DEFAULT:
        args += ["--presets", str(presets), "--accelerator", accelerator]
    proc = subprocess.Popen(["taskset", "-c", last, *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


def night(work: Path, db: Path, accelerator: str, presets: Path, repeat: int, seed: int) -> dict[str, object]:
    """One night of the shipped script; its exit, how long it took, and its comparison's first line."""
    sim, url = _serve(accelerator, presets, seed)
    out = work / f"night-{seed}"
    first = str(sorted(os.sched_getaffinity(0))[0])
    env = {**os.environ, "HARNESS": f"{sys.executable} -m harness", "HARNESS_ENDPOINT": url,
           "HARNESS_OUT": str(out), "HARNESS_HISTORY": str(db), "HARNESS_REPEAT": str(repeat)}
    started = time.monotonic()
    try:
        done = subprocess.run(["taskset", "-c", first, "bash", str(ROOT / "docker" / "ci" / "nightly.sh")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    md = out / "compare.md"
    head = md.read_text(encoding="utf-8").splitlines()[0] if md.is_file() else done.stderr.strip()[-300:]
    itl = [line for line in (md.read_text(encoding="utf-8").splitlines() if md.is_file() else [])
           if line.startswith("| interactive | itl_p50 |")]
    shutil.rmtree(out, ignore_errors=True)  # the history keeps what later nights compare
    return {"exit": done.returncode, "seconds": round(time.monotonic() - started), "said": head,
            "itl_p50": itl[0].split("|")[5].strip() if itl else None,
            "tries": done.stderr.count("running again") + 1}


def series(label: str, nights: list[dict[str, object]]) -> str:
    codes = Counter(str(n["exit"]) for n in nights)
    return f"{label}: {len(nights)} nights, exits {dict(sorted(codes.items()))}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="HARNESS_REPEAT (the script's default: 3)")
    parser.add_argument("--aa", type=int, default=30)
    parser.add_argument("--slow", type=int, default=10, help="nights ~10%% slower")
    parser.add_argument("--slower", type=int, default=10, help="nights ~20%% slower")
    parser.add_argument("--out", type=Path, default=None, help="write every night's outcome here (JSON)")
    args = parser.parse_args()
    results: dict[str, list[dict[str, object]]] = {"aa": [], "slower10": [], "slower20": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        presets, db = _presets(work), work / "history.sqlite"
        for k in range(args.aa):
            results["aa"].append(night(work, db, DEFAULT, presets, args.repeat, 100 + k))
            print(f"A/A night {k + 1}: {results['aa'][-1]}", flush=True)
        for name, count in (("slower10", args.slow), ("slower20", args.slower)):
            for k in range(count):
                copy = work / f"{name}-{k}.sqlite"
                shutil.copyfile(db, copy)
                results[name].append(night(work, copy, name, presets, args.repeat, 500 + k))
                print(f"{name} night {k + 1}: {results[name][-1]}", flush=True)
    print(f"\nREPEAT={args.repeat}")
    judged = results["aa"][1:]  # the first night starts the baseline
    print(series("A/A (judged nights)", judged))
    print(series("~10% slower", results["slower10"]))
    print(series("~20% slower", results["slower20"]))
    if args.out is not None:
        args.out.write_text(json.dumps({"repeat": args.repeat, **results}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
