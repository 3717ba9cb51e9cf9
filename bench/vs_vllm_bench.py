"""The harness beside vLLM's own client, `vllm bench serve`, on the same vLLM server and the same loads, alternated:
each figure both tools report, every run's value, each tool's run-to-run spread, and where they differ beyond it.
Never run by CI (it needs bench/vllm_cpu.py's venv and a served model; ~15 minutes with the defaults).

    .venv/bin/python bench/vllm_cpu.py serve --slots 8 &                  # vLLM on core 1
    .venv/bin/python bench/vs_vllm_bench.py [--alternations 2] [--loads poisson,closed,batch,trace] [--out DIR]

Both clients run on core 0 and use /v1/completions, so a prompt is the tokens asked for by both: vLLM's random
dataset aligns its token ids to the server's tokenizer, the harness counts with the server's /tokenize (its default),
and the trace load replays the same rows of the shipped Azure conversation trace in both (vLLM's `timed_trace`).
Every vLLM run gets a seed of its own: its random dataset draws the same prompts from the same seed, so a second run
(or another load with the same seed) meets the server's prefix cache warm. Each run's prefix-cache hits, read off
the server's counters, are printed beside the figures. docs/vllm.md keeps the table and the reasons for each
difference.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_cpu
from server_counters import counters

REPO = Path(__file__).resolve().parent.parent
AZURE = REPO / "scenarios" / "traces" / "AzureLLMInferenceTrace_conv.csv.gz"
MODEL = "gemma-3-270m"
PROMPT, OUTPUT = 256, 64
# Figure: (vLLM's result key, the harness's summary path); vLLM's ITL is a gap between chunks, as the harness's
# chunk_gap, and equals its token-normalised ITL when each chunk holds one token (vLLM streams one a chunk).
FIGURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "TTFT p50 ms": ("median_ttft_ms", ("latency_ms", "ttft", "p50")),
    "TTFT p99 ms": ("p99_ttft_ms", ("latency_ms", "ttft", "p99")),
    "ITL p50 ms": ("median_itl_ms", ("latency_ms", "chunk_gap", "p50")),
    "ITL p99 ms": ("p99_itl_ms", ("latency_ms", "chunk_gap", "p99")),
    "TPOT p50 ms": ("median_tpot_ms", ("latency_ms", "tpot", "p50")),
    "E2E p50 ms": ("median_e2el_ms", ("latency_ms", "e2e", "p50")),
    "output tok/s": ("output_throughput", ("throughput", "output_tokens_per_s")),
}
HIT_SHARE = "prefix cache hits %"
HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
MEDIAN_FLOOR = 5.0  # %: two runs of a median agree this closely however close the runs were to each other


@dataclass(frozen=True)
class Load:
    name: str
    harness: dict[str, object]  # the phase's load
    vllm: list[str]  # vllm bench serve's flags for the same


@dataclass
class Runs:
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # figure -> tool -> one value a run

    def add(self, tool: str, figures: dict[str, float]) -> None:
        for name, value in figures.items():
            self.values.setdefault(name, {}).setdefault(tool, []).append(value)


def trace_rows(count: int, rate: float, max_prompt: int = 1024, max_output: int = OUTPUT) -> list[dict[str, int]]:
    """`count` consecutive rows of the Azure conversation trace from its 1,000th, their gaps stretched to a mean of
    `rate` req/s, lengths cut to what a 2,048-token context on a CPU engine serves in minutes."""
    with gzip.open(AZURE, "rt") as f:
        lines = f.read().splitlines()[1000:1000 + count]
    stamps, rows = [], []
    for line in lines:
        when, prompt, answer = line.split(",")
        hms = when.split(" ")[1]
        h, m, s = hms.split(":")
        stamps.append(int(h) * 3600 + int(m) * 60 + float(s))
        rows.append((min(int(prompt), max_prompt), max(1, min(int(answer), max_output))))
    stretch = (count - 1) / rate / (stamps[-1] - stamps[0])
    return [{"timestamp": round((t - stamps[0]) * stretch * 1000), "input_length": p, "output_length": o}
            for t, (p, o) in zip(stamps, rows, strict=True)]


def write_traces(out: Path, count: int, rate: float) -> tuple[Path, Path]:
    """The same rows twice: for the harness as Mooncake JSONL without prefix blocks (every prompt its own), for
    vLLM's timed_trace with a block id of its own per 16 tokens (its prompts are built from blocks: none shared)."""
    rows = trace_rows(count, rate)
    ours, theirs = out / "trace-harness.jsonl", out / "trace-vllm.jsonl"
    ours.write_text("".join(json.dumps(r) + "\n" for r in rows))
    theirs.write_text("".join(json.dumps({**r, "hash_ids": [i * 1000 + k for k in range(math.ceil(
        r["input_length"] / 16))]}) + "\n" for i, r in enumerate(rows)))
    return ours, theirs


def loads(out: Path, trace_count: int, trace_rate: float) -> dict[str, Load]:
    ours, theirs = write_traces(out, trace_count, trace_rate)
    return {
        "poisson": Load("poisson", {"type": "poisson", "rate": 0.8, "requests": 32},
                        ["--request-rate", "0.8", "--num-prompts", "32"]),
        "closed": Load("closed", {"type": "concurrency", "concurrency": 4, "requests": 24},
                       ["--request-rate", "inf", "--max-concurrency", "4", "--num-prompts", "24"]),
        "batch": Load("batch", {"type": "batch", "size": 8, "batches": 1},
                      ["--request-rate", "inf", "--num-prompts", "8"]),
        "trace": Load("trace", {"type": "trace", "file": str(ours), "format": "mooncake"},
                      ["--dataset-name", "timed_trace", "--dataset-path", str(theirs),
                       "--timed-trace-sec-multiplier", "0.001", "--num-prompts", str(trace_count)]),
    }


def run_vllm(load: Load, url: str, where: Path, seed: int) -> dict[str, float]:
    where.mkdir(parents=True, exist_ok=True)
    data = [] if "--dataset-name" in load.vllm else ["--dataset-name", "random", "--random-input-len", str(PROMPT),
                                                     "--random-output-len", str(OUTPUT)]
    cmd = ["taskset", "-c", "0", str(vllm_cpu.VENV / "bin" / "vllm"), "bench", "serve", "--backend", "openai",
           "--base-url", url, "--endpoint", "/v1/completions", "--model", MODEL, "--tokenizer",
           str(vllm_cpu.MODEL_DIR), *data, *load.vllm, "--seed", str(seed), "--ignore-eos", "--percentile-metrics",
           "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(where),
           "--result-filename", "result.json", "--disable-tqdm"]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result = json.loads((where / "result.json").read_text())
    if result.get("completed") != result.get("num_prompts", result.get("completed")):
        print(f"  vllm bench: {result.get('completed')} of {result.get('num_prompts')} completed", flush=True)
    return {name: float(result[key]) for name, (key, _) in FIGURES.items()}


def run_harness(load: Load, url: str, where: Path, seed: int) -> dict[str, float]:
    where.mkdir(parents=True, exist_ok=True)
    scenario = {"name": f"vs-{load.name}", "seed": seed, "endpoint": {"api": "completions"},
                "workload": {"prompt_tokens": PROMPT, "output_tokens": OUTPUT},
                "phases": [{"name": load.name, "load": load.harness}]}
    path = where / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    cmd = ["taskset", "-c", "0", sys.executable, "-m", "harness", "run", str(path), "--endpoint", f"{url}/v1",
           "--model", MODEL, "--progress", "off", "--reports-dir", str(where / "runs")]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    (run_dir,) = (where / "runs").iterdir()
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    if phase["client_limited"]:
        print(f"  harness: client limited ({phase['client_limited_reason']})", flush=True)

    def dig(path: tuple[str, ...]) -> float:
        node = phase
        for key in path:
            node = node[key]
        return float(node)

    return {name: dig(path) for name, (_, path) in FIGURES.items()}


def cache_hits(url: str) -> tuple[float, float]:
    """The server's prefix-cache (hit, queried) tokens so far."""
    said = counters(url, (HITS, QUERIES))
    return said.get(HITS, 0.0), said.get(QUERIES, 0.0)


def with_hits(url: str, run: Callable[[], dict[str, float]]) -> dict[str, float]:
    """A run's figures, and the share of its prompt tokens the server found in its prefix cache."""
    hits, queried = cache_hits(url)
    figures = run()
    hits_after, queried_after = cache_hits(url)
    figures[HIT_SHARE] = 100 * (hits_after - hits) / max(1.0, queried_after - queried)
    return figures


def spread(values: list[float]) -> float:
    """The runs' range over their mean, in %."""
    return 100 * (max(values) - min(values)) / statistics.fmean(values) if len(values) > 1 else 0.0


def table(results: dict[str, Runs]) -> str:
    lines = ["| load | figure | vLLM bench runs | harness runs | spread vLLM / harness | harness − vLLM | beyond "
             "spread |", "|---|---|---|---|---|---|---|"]
    for load, runs in results.items():
        for name, by_tool in runs.values.items():
            theirs, ours = by_tool.get("vllm", []), by_tool.get("harness", [])
            if not theirs or not ours:
                continue
            if name == HIT_SHARE:
                lines.append(f"| {load} | {name} | {' / '.join(f'{v:.0f}' for v in theirs)} | "
                             f"{' / '.join(f'{v:.0f}' for v in ours)} | | | |")
                continue
            diff = 100 * (statistics.fmean(ours) / statistics.fmean(theirs) - 1)
            wider = max(spread(theirs), spread(ours), MEDIAN_FLOOR)
            lines.append(f"| {load} | {name} | {' / '.join(f'{v:,.1f}' for v in theirs)} | "
                         f"{' / '.join(f'{v:,.1f}' for v in ours)} | {spread(theirs):.1f}% / {spread(ours):.1f}% | "
                         f"{diff:+.1f}% | {'**yes**' if abs(diff) > wider else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=f"http://127.0.0.1:{vllm_cpu.PORT}")
    parser.add_argument("--alternations", type=int, default=2)
    parser.add_argument("--loads", default="poisson,closed,batch,trace")
    parser.add_argument("--trace-requests", type=int, default=30)
    parser.add_argument("--trace-rate", type=float, default=0.6)
    parser.add_argument("--out", type=Path, default=Path("/tmp/vs-vllm-bench"))
    parser.add_argument("--seed", type=int, default=1000, help="the first run's; each run adds to it")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = loads(args.out, args.trace_requests, args.trace_rate)
    results: dict[str, Runs] = {}
    for name in args.loads.split(","):
        load, runs = chosen[name], results.setdefault(name, Runs())
        for i in range(args.alternations):
            # Alternate which tool goes first, so a drift of the server does not favour one.
            order = ("vllm", "harness") if i % 2 == 0 else ("harness", "vllm")
            seed = args.seed + 100 * list(chosen).index(name) + i  # no two runs share prompts
            for tool in order:
                run = run_vllm if tool == "vllm" else run_harness
                where = args.out / f"{name}-{i}-{tool}"
                runs.add(tool, with_hits(args.url, partial(run, load, args.url, where, seed)))
        (args.out / "results.json").write_text(json.dumps({k: v.values for k, v in results.items()}, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
