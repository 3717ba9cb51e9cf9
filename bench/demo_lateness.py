"""Does the bundled simulator keep real time under `make demo`? Runs the quickstart (`harness run`, the main
job on the bundled simulator) N times and counts the simulator's late steps from its closing line ("sim: fell
behind real time in K steps (worst X ms late …)"); none said is none late (> 2 ms). Issue 67's goal: none on a
quiet 2-core machine. Alternate two commits with PYTHONPATH=<worktree> to compare them in one sitting.

    python bench/demo_lateness.py [--runs 5] [--scenario scenarios/quickstart.yaml]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAID = re.compile(r"fell behind real time in ([\d,]+) steps? \(worst ([\d.]+) ms late")


def late_steps(scenario: Path, reports: Path) -> tuple[int, float]:
    """One run: its late steps and the worst lateness (ms), as the simulator said them."""
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--reports-dir", str(reports)],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode not in (0, 99):  # 99: a threshold broke, which is the run's verdict, not a failure
        raise SystemExit(f"harness run exited {done.returncode}: {done.stderr.strip()[-500:]}")
    found = SAID.search(done.stderr + done.stdout)
    return (int(found.group(1).replace(",", "")), float(found.group(2))) if found else (0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, choices=range(1, 11), metavar="1..10")
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "quickstart.yaml")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    counts = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            steps, worst = late_steps(args.scenario, Path(tmp))
            counts.append(steps)
            print(f"run {k + 1}: {steps} late step{'s' * (steps != 1)}" + (f", worst {worst:.1f} ms" if steps else ""))
    print(f"runs with a late step: {sum(c > 0 for c in counts)} of {len(counts)}; late steps in all: {sum(counts)}")


if __name__ == "__main__":
    main()
