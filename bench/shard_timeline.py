"""Is a run sharded over `--workers 2` the same workload, on the same timeline, as one process? (issue 28)

Runs each phase type against `harness sim serve` on loopback (H100, Llama-3.1-8B) — one scenario of Poisson
arrivals, a closed loop of 3 users and fixed batches of 8; one replaying the Azure conversation trace rescaled to
4 req/s; one of multi-turn sessions (ShareGPT conversations, Poisson starts) — once in one process and once with
`--workers 2`, and prints for each: the gap between a phase's last answer and the next phase's first send
(negative: phases overlapped), the same from each batch to the next (its barrier), each batch's send
spread, the closed loop's time-weighted requests in flight, and
each phase's TTFT p50, ITL p50 and output tokens/s. Bounded: six runs of ~15–25 s; traffic to 127.0.0.1 only.

    .venv/bin/python bench/shard_timeline.py [--workers 2] [--ray ADDRESS] [--scenarios 1]

`--ray ADDRESS` runs the sharded side on Ray actors of that cluster (`ray start --head --num-cpus 2` on this
host); `--scenarios 1` runs only the first scenario (the phase boundaries and batches).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = """
name: timeline
seed: 4
workload: {prompt_tokens: 256, output_tokens: {dist: uniform, min: 16, max: 96}}
phases:
  - name: poisson
    load: {type: poisson, rate: 6, requests: 60}
  - name: users
    load: {type: concurrency, concurrency: 3, requests: 30}
  - name: batch
    load: {type: batch, size: 8, batches: 4}
"""
TRACE = f"""
name: trace
seed: 4
phases:
  - name: trace
    load: {{type: trace, file: {ROOT}/scenarios/traces/AzureLLMInferenceTrace_conv.csv.gz, end_s: 1800,
           target_rate: 4, duration_s: 15}}
"""
SESSIONS = f"""
name: sessions
seed: 4
workload:
  dataset: {{type: sharegpt, file: {ROOT}/scenarios/data/sharegpt-sample.json, output_tokens: workload}}
  output_tokens: 48
  sessions: {{think_s: {{dist: exponential, mean_s: 0.3}}}}
phases:
  - name: sessions
    load: {{type: poisson, rate: 3, requests: 24}}
"""


def in_flight(records: list[dict[str, Any]]) -> float:
    events = sorted([(r["sent_ns"], 1) for r in records] + [(r["end_ns"], -1) for r in records])
    area, level, last = 0.0, 0, events[0][0]
    for t, step in events:
        area += level * (t - last)
        level, last = level + step, t
    return float(area / (events[-1][0] - events[0][0]))


def one(url: str, tmp: Path, name: str, extra: list[str], scenario: str = SCENARIO) -> None:
    (tmp / "timeline.yaml").write_text(scenario)
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(tmp / "timeline.yaml"), "--endpoint", url,
                           "--progress", "off", "--reports-dir", str(tmp / name), *extra],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    (run_dir,) = (d for d in (tmp / name).iterdir() if d.is_dir())
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    by_phase = {p["name"]: [r for r in records if r["phase"] == p["name"]] for p in summary["phases"]}
    names = list(by_phase)
    gaps = [(min(r["sent_ns"] for r in by_phase[b]) - max(r["end_ns"] for r in by_phase[a])) / 1e6
            for a, b in itertools.pairwise(names)]
    spreads, barriers = [], []
    batches = sorted({r["batch"] for r in by_phase.get("batch", [])})
    for k in batches:
        sends = [r["sent_ns"] for r in by_phase["batch"] if r["batch"] == k]
        spreads.append((max(sends) - min(sends)) / 1e6)
    for a, b in itertools.pairwise(batches):  # the last answer of a batch to the next batch's first send
        barriers.append((min(r["sent_ns"] for r in by_phase["batch"] if r["batch"] == b)
                         - max(r["end_ns"] for r in by_phase["batch"] if r["batch"] == a)) / 1e6)
    if "users" in by_phase:
        print(f"{name}: phase gaps {', '.join(f'{g:+.1f}' for g in gaps)} ms; batch barriers "
              f"{', '.join(f'{g:+.1f}' for g in barriers)} ms; batch send spread "
              f"{', '.join(f'{s:.1f}' for s in spreads)} ms; closed loop in flight {in_flight(by_phase['users']):.2f}")
    else:
        print(f"{name}: {len(records)} requests")
    for p in summary["phases"]:
        lat = p["latency_ms"]
        print(f"  {p['name']:8} TTFT p50 {lat['ttft']['p50']:7.1f} ms  ITL p50 {lat['itl']['p50']:5.2f} ms  "
              f"output {p['throughput']['output_tokens_per_s']:7.1f} tok/s  client limited {p['client_limited']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ray", metavar="ADDRESS", help="the sharded runs on Ray actors of this cluster")
    parser.add_argument("--scenarios", type=int, default=3, help="how many of the three scenarios to run")
    args = parser.parse_args()
    sharded = ["--workers", str(args.workers), *(["--ray", args.ray] if args.ray else [])]
    label = f"--workers {args.workers}" + (" --ray" if args.ray else "")
    sim = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--seed", "2"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert sim.stdout is not None
        url = json.loads(sim.stdout.readline())["url"]
        for scenario in (SCENARIO, TRACE, SESSIONS)[:args.scenarios]:
            with tempfile.TemporaryDirectory() as workdir:
                one(url, Path(workdir), "one process", [], scenario)
                one(url, Path(workdir), label, sharded, scenario)
    finally:
        sim.terminate()
        sim.communicate(timeout=15)


if __name__ == "__main__":
    main()
