"""Scale-out: the client's ceiling and its TTFT error with one harness process and with `--workers 2`.

The simulator runs in fixed timing in its own process (`harness sim serve --timing fixed --stream-writes token`:
every event its own socket write, as vLLM, llama.cpp and TGI stream), pinned to the last core. Against it,
`harness run` (one process, pinned to the first core) and `harness run --workers 2` (a core each where there
are two; on this 2-core machine the second shares the simulator's):

  ceiling   STREAMS users, closed loop, 512 tokens each at zero simulated delay, for --seconds: the merged
            output tokens/s, the harness CPU per 1,000 tokens (all workers together), the simulator's own CPU
            (cores busy over the phase: near 1.0 it, not the client, sets the pace) and the self-check;
  fidelity  1,024 users, closed loop, staggered over one request's length, fixed TTFT 50 ms and ITL 10 ms,
            128 tokens, for --seconds: |measured − the simulator's ground truth| TTFT p50 / p99 and per-chunk
            gap p99 over the same request ids (`harness calibrate`'s comparison).

Every level is bounded by --seconds (closed loop, duration-bound); traffic stays on 127.0.0.1.

    .venv/bin/python bench/scale.py [--seconds 15] [--streams 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from harness.records_read import read_records
from harness.tools.calibrate import errors, ground_truth

ROOT = Path(__file__).resolve().parents[1]


def _scenario(path: Path, users: int, seconds: float, tokens: int, stagger_s: float) -> Path:
    path.write_text(yaml.safe_dump({
        "name": path.stem, "workload": {"prompt_tokens": 16, "output_tokens": tokens},
        "endpoint": {"scrape_interval_s": 0},
        "phases": [{"name": "streams", "load": {"type": "concurrency", "concurrency": users,
                                                 "duration_s": seconds + stagger_s, "stagger_s": stagger_s}}]}))
    return path


def _simulator(ttft_ms: float, itl_ms: float, core: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-m", "harness", "sim", "serve", "--port",
                             "0", "--timing", "fixed", "--fixed-ttft-ms", str(ttft_ms), "--fixed-itl-ms",
                             str(itl_ms), "--stream-writes", "token"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _run(scenario: Path, url: str, workers: int, reports: Path) -> Path:
    cmd = [sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", url, "--reports-dir", str(reports),
           "--progress", "off"]
    cmd = [*cmd, "--workers", str(workers)] if workers > 1 else ["taskset", "-c", "0", *cmd]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"harness run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    return run_dir


def _level(run_dir: Path, sim_cpu_s: float) -> dict[str, Any]:
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    tokens = phase["tokens"]["output"]
    cpu = phase["client"]["cpu_seconds"] or 0.0
    return {"output_tokens_per_s": phase["throughput"]["output_tokens_per_s"], "requests": phase["requests"]["ok"],
            "simulator_cores": sim_cpu_s / phase["window"]["duration_s"],
            "cpu_ms_per_1k_tokens": cpu * 1e3 / (tokens / 1e3) if tokens else None,
            "client_limited": phase["client_limited"], "reason": phase.get("client_limited_reason")}


def _measured(sim: subprocess.Popen[str], url: str, scenario: Path, workers: int, reports: Path,
              truth: bool) -> dict[str, Any]:
    try:
        before = _cpu_s(sim.pid)
        run_dir = _run(scenario, url, workers, reports)
        level = _level(run_dir, _cpu_s(sim.pid) - before)
        if truth:
            records = list(read_records(run_dir / "requests.jsonl"))
            level |= errors(records, asyncio.run(ground_truth(url, [r.request_id for r in records])))
        return level
    finally:
        sim.terminate()
        sim.wait(timeout=30)


def measure(workers: int, seconds: float, streams: int, tmp: Path) -> dict[str, Any]:
    last = (os.cpu_count() or 1) - 1
    sim, url = _simulator(0.0, 0.0, last)
    ceiling = _measured(sim, url, _scenario(tmp / f"ceiling-{workers}.yaml", streams, seconds, 512, 0.0), workers,
                        tmp / f"ceiling-{workers}", truth=False)
    sim, url = _simulator(50.0, 10.0, last)
    stagger = (50 + 10 * 128) / 1e3
    fidelity = _measured(sim, url, _scenario(tmp / f"fidelity-{workers}.yaml", 1024, seconds, 128, stagger), workers,
                         tmp / f"fidelity-{workers}", truth=True)
    return {"workers": workers, "ceiling": ceiling, "fidelity": fidelity}


def render(results: list[dict[str, Any]], streams: int) -> str:
    def f(v: float | None, spec: str = ".2f") -> str:
        return "-" if v is None else format(v, spec)

    lines = [f"ceiling: {streams} streams of 512 tokens at zero delay; fidelity: 1,024 streams, TTFT 50 ms, "
             "ITL 10 ms, 128 tokens (errors: |harness − simulator truth|)",
             f"{'workers':>7} {'ceiling tok/s':>14} {'CPU ms/1k tok':>14} {'sim cores':>9} {'limited':>8} "
             f"{'fid tok/s':>10} {'TTFT err p50/p99 ms':>20} {'gap err p99 ms':>15} {'sim cores':>9} "
             f"{'limited':>8}"]
    for r in results:
        c, d = r["ceiling"], r["fidelity"]
        lines.append(f"{r['workers']:>7} {f(c['output_tokens_per_s'], ',.0f'):>14} "
                     f"{f(c['cpu_ms_per_1k_tokens']):>14} {f(c['simulator_cores']):>9} "
                     f"{'yes' if c['client_limited'] else 'no':>8} "
                     f"{f(d['output_tokens_per_s'], ',.0f'):>10} "
                     f"{f(d['ttft_error_ms']['p50']) + ' / ' + f(d['ttft_error_ms']['p99']):>20} "
                     f"{f(d['chunk_gap_error_ms']['p99']):>15} {f(d['simulator_cores']):>9} "
                     f"{'yes' if d['client_limited'] else 'no':>8}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--streams", type=int, default=256, help="users of the ceiling level")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(n, args.seconds, args.streams, Path(tmp)) for n in (1, 2)]
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(render(results, args.streams))


if __name__ == "__main__":
    main()
