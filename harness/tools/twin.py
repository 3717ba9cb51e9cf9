"""A simulator fitted to a measured endpoint ("digital twin"): `harness sim fit` and `harness sim validate`.

The fit reads what a run's records already hold. Every gap between two streamed chunks of a request is one
engine step; while it lasted, the other records say how many requests were decoding, how many tokens of
context they held and which prompts were being prefilled (a request's first token ends its prefill's step).
A fit of the gaps to

    step ms = step + per_seq · sequences + per_context · context/1000 + hypot(weights, per_ktoken · tokens/1000)

(tokens: one a decoding sequence plus the prompts prefilled; the roofline's blend of reading the weights and
computing on every token, so prompts cost little until a step turns compute-bound; no coefficient below zero;
gaps more than five median deviations off refitted without) gives the step-time model of a `kind: fitted`
accelerator. Its KV capacity is the tokens held over the server's KV usage, where
the run scraped `kv_cache_usage`. Validation replays a run's own scenario in virtual time on the fitted
accelerator and sets the prediction beside the measurement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypedDict

import numpy as np
import yaml

from harness.config.presets import ACCELERATORS, MODELS, FittedAccelerator, load_presets
from harness.config.scenario import Scenario, load_scenario
from harness.errors import ScenarioError
from harness.records import RequestRecord, read_records
from harness.stats.schema import read_summary
from harness.stats.server import Row, read_server_metrics
from harness.stats.thresholds import observed
from harness.tools.predict import predict, predict_runs

MAX_SAMPLES = 200_000  # step gaps kept for the fit (a stride over more)
UNMEASURED_KV_TOKENS = 10_000_000  # no KV usage scraped: the twin never runs out


@dataclass(frozen=True)
class Streams:
    """The ok requests of a run as sorted arrays: when each decoded, what it held, what it prefilled."""

    sent: np.ndarray  # request sent, ns
    first: np.ndarray  # first token, ns
    last: np.ndarray  # last token, ns
    prompt: np.ndarray  # prompt tokens
    chunks: np.ndarray  # every token-bearing chunk of every request, sorted
    count: np.ndarray  # chunks per request

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> Streams:
        ok = [r for r in records if r.status == "ok" and len(r.chunk_ns) >= 2]
        prompt = [r.prompt_tokens or r.prompt_tokens_requested for r in ok]
        return cls(np.array([r.sent_ns or r.chunk_ns[0] for r in ok], dtype=np.int64),
                   np.array([r.chunk_ns[0] for r in ok], dtype=np.int64),
                   np.array([r.chunk_ns[-1] for r in ok], dtype=np.int64), np.array(prompt, dtype=np.float64),
                   np.sort(np.concatenate([np.asarray(r.chunk_ns, dtype=np.int64) for r in ok]
                                          or [np.zeros(0, dtype=np.int64)])),
                   np.array([len(r.chunk_ns) for r in ok], dtype=np.float64))

    def held(self, t: np.ndarray, since_sent: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """At each time: the requests decoding (`since_sent`: sent and not finished), and the tokens of context
        they hold (prompt + generated)."""
        start = self.sent if since_sent else self.first
        by_first, by_last = np.argsort(start), np.argsort(self.last)
        started = np.searchsorted(start[by_first], t, side="right")
        ended = np.searchsorted(self.last[by_last], t, side="right")
        prompt_started = np.concatenate([[0.0], np.cumsum(self.prompt[by_first])])[started]
        prompt_ended = np.concatenate([[0.0], np.cumsum(self.prompt[by_last])])[ended]
        generated = np.searchsorted(self.chunks, t, side="right") - np.concatenate(
            [[0.0], np.cumsum(self.count[by_last])])[ended]
        return (started - ended).astype(np.float64), prompt_started - prompt_ended + generated

    def prefilled(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Prompt tokens of the requests whose first token came in (start, end]: prefilled in that step."""
        order = np.argsort(self.first)
        cum = np.concatenate([[0.0], np.cumsum(self.prompt[order])])
        firsts = self.first[order]
        return np.asarray(cum[np.searchsorted(firsts, end, side="right")]
                          - cum[np.searchsorted(firsts, start, side="right")])


def step_samples(records: Sequence[RequestRecord]) -> np.ndarray:
    """One row per chunk gap: [gap ms, sequences, context/1000, prefill tokens/1000].

    A prefill's first token leaves with its step's other tokens but reaches the client a little before or after
    them, so each step owns the first tokens nearest its end: from half its own gap before the end to half the
    next gap after it. Consecutive steps of a stream thus share the timeline out without overlap (a long
    prefill step does not also claim the first tokens of the short steps after it)."""
    streams = Streams.of(records)
    parts = []
    for r in records:
        if r.status == "ok" and len(r.chunk_ns) >= 2:
            c = np.asarray(r.chunk_ns, dtype=np.int64)
            gaps = np.diff(c)
            after = np.append(gaps[1:], gaps[-1])  # the last step: as far after as its own half
            parts.append(np.column_stack([c[:-1], c[1:], c[1:] - gaps // 2, c[1:] + after // 2]))
    if not parts:
        return np.zeros((0, 4))
    rows = np.concatenate(parts)
    if len(rows) > MAX_SAMPLES:
        rows = rows[np.linspace(0, len(rows) - 1, MAX_SAMPLES).astype(np.int64)]
    start, end, owned_from, owned_to = rows.T
    seqs, context = streams.held((start + end) // 2)
    return np.column_stack([(end - start) / 1e6, seqs, context / 1e3, streams.prefilled(owned_from, owned_to) / 1e3])


def _design(samples: np.ndarray, weights_ms: float, per_ktoken_ms: float) -> tuple[np.ndarray, np.ndarray]:
    """With the roofline part fixed, the rest is linear: y − hypot(…) = step + per_seq·seqs + per_context·ctx."""
    tokens_k = samples[:, 1] / 1e3 + samples[:, 3]  # one decode token a sequence, and the prompts prefilled
    y = samples[:, 0] - np.hypot(weights_ms, per_ktoken_ms * tokens_k)
    return np.column_stack([np.ones(len(samples)), samples[:, 1], samples[:, 2]]), y


def _search(samples: np.ndarray, weights: np.ndarray, per_ktoken: np.ndarray) -> tuple[float, float, float]:
    """The (weights, per_ktoken) pair of the grids whose linear remainder fits best: (error, weights, per_ktoken)."""
    best = (np.inf, 0.0, 0.0)
    for w in weights:
        for k in per_ktoken:
            x, y = _design(samples, float(w), float(k))
            coef = _nonnegative(x, y)
            err = float(np.mean((y - x @ coef) ** 2))
            if err < best[0]:
                best = (err, float(w), float(k))
    return best


def fit_steps(samples: np.ndarray) -> dict[str, float]:
    """The step model's five coefficients: a grid search over the roofline part (the weights' read time and the
    compute time per 1,000 tokens, blended as the simulator blends them), least squares with no coefficient
    below zero for the rest; then once more without the gaps more than five median deviations off the fit."""
    gaps = samples[:, 0]
    weights = np.linspace(0.0, float(np.percentile(gaps, 5)), 24)
    per_ktoken = np.concatenate([[0.0], np.geomspace(0.1, 1000.0, 40)])
    _, w, k = _search(samples, weights, per_ktoken)
    for _ in range(2):  # refine around the best point
        weights = np.linspace(max(0.0, w * 0.8), w * 1.2 + 1e-6, 9)
        per_ktoken = np.linspace(max(0.0, k * 0.8), k * 1.2 + 1e-6, 9)
        _, w, k = _search(samples, weights, per_ktoken)
    x, y = _design(samples, w, k)
    residual = y - x @ _nonnegative(x, y)
    mad = float(np.median(np.abs(residual - np.median(residual)))) or 1e-9
    kept = samples[np.abs(residual) <= 5 * mad]
    x, y = _design(kept, w, k)
    step, per_seq, per_context = (float(c) for c in _nonnegative(x, y))
    return {"step_ms": step, "weights_ms": w, "per_ktoken_ms": k, "per_seq_ms": per_seq,
            "per_context_ktoken_ms": per_context}


def _nonnegative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    free = np.ones(x.shape[1], dtype=bool)
    coef = np.zeros(x.shape[1])
    for _ in range(x.shape[1]):
        coef[:] = 0.0
        coef[free] = np.linalg.lstsq(x[:, free], y, rcond=None)[0]
        if (coef >= 0).all():
            break
        free &= coef > 0
    return np.clip(coef, 0.0, None)


KV_MIN_USAGE = 0.05  # below this the cache holds too few blocks for held tokens / usage to mean much


def kv_capacity(records: Sequence[RequestRecord], rows: Sequence[Row]) -> int | None:
    """Tokens held / KV usage over the scrapes where the cache was at least 5% used and nothing waited (so every
    request sent and not finished held its blocks, being prefilled or decoding); None if there were none."""
    usage = [(r.t_ns, r.values["kv_cache_usage"]) for r in rows
             if r.values.get("kv_cache_usage", 0.0) >= KV_MIN_USAGE and not r.values.get("waiting", 0.0)]
    if not usage:
        return None
    _, held = Streams.of(records).held(np.array([t for t, _ in usage], dtype=np.int64), since_sent=True)
    return int(np.median(held / np.array([u for _, u in usage])))


@dataclass(frozen=True)
class Fit:
    accelerator: FittedAccelerator
    samples: int
    kv_measured: bool
    kv_usage_max: float | None = None  # the highest KV cache usage the runs scraped (None: they scraped none)

    @property
    def kv_note(self) -> str:
        """Why the KV capacity is a default rather than measured, or nothing when it was measured."""
        if self.kv_measured:
            return ""
        if self.kv_usage_max is None:
            return " (not measured: the runs scraped no KV usage)"
        return (f" (not measured: KV usage peaked at {self.kv_usage_max:.0%}, under the {KV_MIN_USAGE:.0%} it takes "
                "to measure the capacity; fit runs of a heavier load)")

    def preset_yaml(self, sources: Sequence[Path]) -> str:
        fields = {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self.accelerator).items()
                  if k != "name"}
        head = "".join(f"# fitted by `harness sim fit` from {p}\n" for p in sources)
        return head + yaml.safe_dump({"accelerators": {self.accelerator.name: {"kind": "fitted", **fields}}},
                                     sort_keys=False)


def fit_runs(run_dirs: Sequence[Path], name: str, model: str | None = None) -> Fit:
    records = [rec for d in run_dirs for rec in _records(d)]
    samples = step_samples(records)
    if len(samples) < 20:
        raise ScenarioError(f"{', '.join(map(str, run_dirs))}: too few streamed tokens to fit ({len(samples)} "
                            "gaps; runs need ok requests of two or more chunks)")
    scraped = [read_server_metrics(d) for d in run_dirs]
    kv = [k for d, rows in zip(run_dirs, scraped, strict=True)
          if (k := kv_capacity(list(_records(d)), rows)) is not None]
    usage = [v for rows in scraped for r in rows if (v := r.values.get("kv_cache_usage")) is not None]
    coefficients = fit_steps(samples)
    kv_tokens = int(np.median(kv)) if kv else UNMEASURED_KV_TOKENS
    steps_only = FittedAccelerator(name, **coefficients, kv_tokens=kv_tokens)
    return Fit(replace(steps_only, request_ms=request_overhead_ms(steps_only, run_dirs, model)), len(samples),
               bool(kv), max(usage) if usage else None)


def request_overhead_ms(steps_only: FittedAccelerator, run_dirs: Sequence[Path], model: str | None) -> float:
    """The time a request spends outside the engine's steps: the median, over every ok request of the fitted
    runs, of its measured less its replayed TTFT on the steps alone (never below zero). A step fit cannot see
    it: it lies between the client's send and the engine's admission, and between the first token's step and
    the client's read."""
    ACCELERATORS[steps_only.name] = steps_only
    short = [gap for d in run_dirs for gap in _ttft_shortfall_ms(d, steps_only.name, model)]
    return max(0.0, float(np.median(short))) if short else 0.0


def _ttft_shortfall_ms(run_dir: Path, accelerator: str, model: str | None) -> list[float]:
    """Measured less replayed TTFT of each request answered in both, matched by phase and index."""
    def ttft(rec: RequestRecord) -> float | None:
        if rec.status != "ok" or rec.first_token_ns is None or rec.sent_ns is None:
            return None
        return (rec.first_token_ns - rec.sent_ns) / 1e6

    _, runs = asyncio.run(predict_runs(on_twin(load_scenario(run_dir / "scenario.yaml"), accelerator, model)))
    replayed = {(r.phase, r.index): t for run in runs for r in run.records if (t := ttft(r)) is not None}
    return [t - replayed[key] for r in _records(run_dir)
            if (t := ttft(r)) is not None and (key := (r.phase, r.index)) in replayed]


def _records(run_dir: Path) -> list[RequestRecord]:
    path = run_dir / "requests.jsonl"
    if not path.is_file():
        raise ScenarioError(f"{run_dir}: not a run directory (no requests.jsonl)")
    return list(read_records(path))


# The figures a twin is judged on, as the metric registry names them
COMPARED = (("TTFT p50 ms", "ttft_p50"), ("TTFT p99 ms", "ttft_p99"), ("ITL p50 ms", "itl_p50"),
            ("output tokens/s", "output_tokens_per_s"))


def on_twin(scenario: Scenario, accelerator: str, model: str | None) -> Scenario:
    data = scenario.simulator.model_dump(mode="json")
    for key in ("max_num_seqs", "max_num_batched_tokens", "tp", "dtype"):
        data.pop(key)  # the twin's own; its step times hold the endpoint's parallelism and weight type
    sim = scenario.simulator.model_validate({**data, "accelerator": accelerator,
                                             "model": model or scenario.simulator.model})
    return scenario.model_copy(update={"simulator": sim})


class ValidationRow(TypedDict):
    """One figure of one phase of a run: measured, predicted by the twin, and the error (None: no data)."""

    run: str
    phase: str
    figure: str
    measured: float | None
    predicted: float | None
    error: float | None


def validate_run(run_dir: Path, accelerator: str, model: str | None = None) -> list[ValidationRow]:
    """Per phase of the run: each compared figure, measured and predicted on `accelerator`, and the error."""
    measured = read_summary(run_dir / "summary.json")
    predicted = predict(on_twin(load_scenario(run_dir / "scenario.yaml"), accelerator, model))
    rows: list[ValidationRow] = []
    for m, p in zip(measured.phases, predicted.phases, strict=True):
        for label, name in COMPARED:
            got, want = observed(name, p), observed(name, m)
            error = None if got is None or not want else got / want - 1
            rows.append({"run": str(run_dir), "phase": m.name, "figure": label, "measured": want,
                         "predicted": got, "error": error})
    return rows


def load_twin(preset: Path, accelerator: str | None) -> str:
    """Load a fitted preset file; the accelerator to use (the file's only fitted one when not named)."""
    load_presets(preset)
    data = yaml.safe_load(preset.read_text(encoding="utf-8")) or {}
    entries = (data.get("accelerators") or {}).items()
    fitted = [n for n, e in entries if isinstance(e, dict) and e.get("kind") == "fitted"]
    if accelerator is None:
        if len(fitted) != 1:
            raise ScenarioError(f"{preset}: holds {len(fitted)} fitted accelerators; name one with --accelerator")
        return str(fitted[0])
    return accelerator


def known_model(model: str | None) -> str | None:
    if model is not None and model not in MODELS:
        raise ScenarioError(f"--model: unknown model {model!r}; known: {', '.join(sorted(MODELS))}")
    return model
