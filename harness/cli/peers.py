"""Flags people bring from vLLM's `bench serve`, GuideLLM, AIPerf and k6, and what this harness calls the same
thing: an unknown flag gets a pointer to the right flag or scenario field, not a guess by spelling (which sent
`--threshold` to `--metrics-hold` and `--warmup` to `--api`). Flags that exist here under the peer's name are
aliases of the option itself (`--num-prompts`, `--request-rate`, `--base-url`, `--max-concurrency`…)."""

from __future__ import annotations

PEER_FLAGS: dict[str, str] = {
    # vLLM bench serve
    "--random-range-ratio": "--prompt-tokens uniform:MIN:MAX",
    "--percentile-metrics": "every percentile is in summary.json and the table; pass/fail: --threshold",
    "--metric-percentiles": "every percentile is in summary.json and the table; pass/fail: --threshold",
    "--goodput": "--slo ttft=500ms,tpot=50ms (goodput is counted against it)",
    "--ignore-eos": "the harness asks for exact lengths by default (workload.ignore_eos in a scenario)",
    "--tokenizer-mode": "--tokenizer PATH|server",
    "--seed": "--seed N (a quick run's), or seed: in a scenario",
    "--temperature": "--extra-body '{\"temperature\": 0}', or endpoint.sampling in a scenario",
    "--top-p": "--extra-body '{\"top_p\": 0.9}', or endpoint.sampling in a scenario",
    "--top-k": "--extra-body '{\"top_k\": 50}', or endpoint.sampling in a scenario",
    "--min-p": "--extra-body '{\"min_p\": 0.1}', or endpoint.sampling in a scenario",
    "--custom-output-len": "--output-tokens N",
    "--backend": "--api chat|completions (any OpenAI-compatible server)",
    # GuideLLM
    "--rate-type": "--profile synchronous|concurrent|constant|poisson|sweep, or --rate R / --concurrency N / --batch B",
    "--max-seconds": "--duration 30s",
    "--max-requests": "--requests N",
    "--data": "workload.dataset in a scenario (docs/scenarios.md), or --prompt-tokens/--output-tokens",
    "--output-path": "--output-json FILE (the summary), or --reports-dir DIR (the whole run)",
    "--backend-args": "--header 'NAME: VALUE' for headers, --extra-body JSON for body fields",
    "--target": "--endpoint URL",
    # AIPerf / genai-perf
    "--url": "--endpoint URL",
    "--request-count": "--requests N",
    "--synthetic-input-tokens-mean": "--prompt-tokens normal:MEAN:STD",
    "--synthetic-input-tokens-stddev": "--prompt-tokens normal:MEAN:STD",
    "--output-tokens-mean": "--output-tokens normal:MEAN:STD",
    "--output-tokens-stddev": "--output-tokens normal:MEAN:STD",
    "--streaming": "the harness always streams",
    "--endpoint-type": "--api chat|completions",
    "--extra-inputs": "--extra-body JSON (every request's body gains its fields)",
    "-H": "--header 'NAME: VALUE'",
    "--warmup-request-count": "--warmup DURATION (the phase's first seconds are left out of its statistics)",
    "--profile-export-file": "--output-json FILE, or --reports-dir DIR",
    "--request-rate-mode": "--rate R (Poisson), or a constant load in a scenario",
    # k6
    "--vus": "--concurrency N",
    "--iterations": "--requests N",
    "--out": "--metrics-port PORT (Prometheus) or --pushgateway URL",
    "--summary-export": "summary.json is in every run's folder",
}


def peer_hint(flag: str) -> str | None:
    """What to give instead of a peer's flag (`--random-input-len` → `--prompt-tokens N`), or None."""
    return PEER_FLAGS.get(flag.split("=", 1)[0])
