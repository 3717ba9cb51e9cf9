"""The files other tools already ingest, written from a run's summary (and, for vLLM's, its records):

- **CSV**: one row per phase, flat columns — the run's facts, its labels (`label.<k>`), every figure of the metric
  registry under its registry name (latencies in ms), and the phase's counts — as GuideLLM's and AIPerf's
  aggregate CSVs give one;
- **vLLM's `--save-result` JSON**: per phase, the keys `vllm bench serve` writes (without `--save-detailed`),
  for dashboards built on its files. vLLM's ITL is its gap between chunks: the harness's `chunk_gap`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.clock import NS_PER_S
from harness.config.metric_registry import REGISTRY, Latency
from harness.records import RequestRecord
from harness.stats.metrics import PER_RECORD, schedule_lag_ns
from harness.stats.schema import Distribution, PhaseSummary, Summary
from harness.stats.thresholds import observed

_FACTS = ("run_id", "scenario", "started_at", "harness_version", "endpoint", "model", "phase", "load")
_COUNTS = ("requests_total", "requests_ok", "requests_failed", "input_tokens", "output_tokens", "window_s",
           "client_limited")
# vLLM's metric names → the harness's latency each is.
_VLLM_LATENCIES = {"ttft": Latency.TTFT, "tpot": Latency.TPOT, "itl": Latency.CHUNK_GAP, "e2el": Latency.E2E}
_VLLM_PERCENTILES = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}


def csv_text(summaries: Sequence[Summary]) -> str:
    """Every phase of every run, a row each; a label column for every label any run has."""
    labels = sorted({k for s in summaries for k in s.run.labels})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*_FACTS, *(f"label.{k}" for k in labels), *REGISTRY, *_COUNTS])
    for summary in summaries:
        for phase in summary.phases:
            writer.writerow([*_facts(summary, phase), *(summary.run.labels.get(k, "") for k in labels),
                             *(_cell(observed(name, phase)) for name in REGISTRY), *_counts(phase)])
    return out.getvalue()


def _facts(summary: Summary, phase: PhaseSummary) -> list[str]:
    run = summary.run
    return [run.run_id, run.scenario, run.started_at or "", run.harness_version,
            run.endpoint.base_url if run.endpoint else "", run.model, phase.name, phase.load_kind]


def _counts(phase: PhaseSummary) -> list[str]:
    r, t = phase.requests, phase.tokens
    return [str(r.total), str(r.ok), str(r.failed), str(t.input), str(t.output), _cell(phase.window.duration_s),
            str(int(phase.client_limited))]


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# vLLM's bench backends for the APIs it drives too.
VLLM_BACKENDS = {"chat": "openai-chat", "completions": "openai", "embeddings": "openai-embeddings"}


def vllm_result(summary: Summary, phase: PhaseSummary, records: Sequence[RequestRecord]) -> dict[str, object]:
    """One phase as `vllm bench serve --save-result` writes a run (`records`: the phase's, for its per-request
    `latencies` and `queue_times`); the run's labels and metadata as top-level keys, as vLLM's --metadata."""
    run, load = summary.run, phase.config["load"]
    started = dt.datetime.fromisoformat(run.started_at) if run.started_at else dt.datetime.now(dt.UTC)
    api = run.endpoint.api if run.endpoint is not None else "chat"
    backend = VLLM_BACKENDS.get(api, f"harness-{api}")  # an API vLLM's bench has no backend for says whose it is
    model = run.model
    measured = [r for r in records if phase.window.start_ns <= r.intended_ns <= phase.window.end_ns]
    out: dict[str, object] = {
        "date": started.strftime("%Y%m%d-%H%M%S"), "endpoint_type": backend, "backend": backend, "label": None,
        "model_id": model, "tokenizer_id": model, "num_prompts": phase.requests.total,
        **run.labels, **run.metadata,
        "request_rate": load.get("rate", "inf") if load["type"] in ("poisson", "gamma", "constant") else "inf",
        "burstiness": _burstiness(load), "max_concurrency": load.get("concurrency"),
        "duration": phase.window.duration_s, "completed": phase.requests.ok, "failed": phase.requests.failed,
        "total_input_tokens": phase.tokens.input, "total_output_tokens": phase.tokens.output,
        "request_throughput": phase.throughput.requests_per_s,
        "request_goodput": phase.goodput.requests_per_s if phase.goodput.slo.model_dump(exclude_none=True) else None,
        "output_throughput": phase.throughput.output_tokens_per_s,
        "total_token_throughput": phase.throughput.total_tokens_per_s,
        "latencies": [_seconds(PER_RECORD[Latency.E2E](r)) for r in measured],
        "queue_times": [_seconds(schedule_lag_ns(r)) for r in measured],
        "max_output_tokens_per_s": None, "max_concurrent_requests": None, "rtfx": 0.0}
    for name, latency in _VLLM_LATENCIES.items():
        out |= _vllm_distribution(name, getattr(phase.latency_ms, latency))
    return out


def write_vllm(summary: Summary, records: Sequence[RequestRecord], where: Path) -> list[Path]:
    """Each phase's vLLM result as `vllm-<run id>-<phase>.json` in `where`; the paths written."""
    where.mkdir(parents=True, exist_ok=True)
    written = []
    for phase in summary.phases:
        path = where / f"vllm-{summary.run.run_id}-{phase.name}.json"
        result = vllm_result(summary, phase, [r for r in records if r.phase == phase.name])
        path.write_text(json.dumps(result, indent=2), encoding="utf-8")
        written.append(path)
    return written


def _burstiness(load: Mapping[str, Any]) -> float | None:
    """vLLM's gamma shape: 1 is Poisson; the harness's gamma gives its coefficient of variation,
    1/sqrt(shape)."""
    if load["type"] == "poisson":
        return 1.0
    if load["type"] == "gamma":
        return float(1 / load["cv"] ** 2)
    return None


def _seconds(ns: float | None) -> float:
    return 0.0 if ns is None else ns / NS_PER_S


def _vllm_distribution(name: str, dist: Distribution) -> dict[str, float | None]:
    out = {f"mean_{name}_ms": dist.mean, f"median_{name}_ms": dist.p50, f"std_{name}_ms": dist.std}
    return out | {f"{key}_{name}_ms": getattr(dist, field) for key, field in _VLLM_PERCENTILES.items()}
