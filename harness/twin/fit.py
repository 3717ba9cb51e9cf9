"""A simulator fitted to a measured endpoint ("digital twin"): `harness sim fit` and `harness sim validate`.

The fit reads what a run's records already hold, as rows of engine steps (`twin_samples`). A fit of the steps
to

    step ms = step + per_seq · sequences + per_context · context/1000 + hypot(weights, per_ktoken · tokens/1000)

(tokens: one a decoding sequence plus the prompts prefilled; the roofline's blend of reading the weights and
computing on every token, so prompts cost little until a step turns compute-bound; no coefficient below zero;
gaps more than five median deviations off refitted without) gives the step-time model of a `kind: fitted`
accelerator; where the decode step is not linear in its batch, a table of measured steps by batch size
(`twin_curve`) replaces the line where the measured decode steps depart from it (`NONLINEAR`). Its
KV capacity is the tokens held over the server's KV usage, where the run scraped `kv_cache_usage`. Validation
replays a run's own scenario in virtual time on the fitted accelerator and sets the prediction beside the
measurement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import yaml

from harness.config.scenario import Scenario, load_scenario
from harness.devices.catalogue import catalogue, use, within
from harness.devices.fitted import FittedAccelerator
from harness.errors import ScenarioError
from harness.records import RequestRecord
from harness.records_read import read_records
from harness.stats.schema import read_summary
from harness.stats.server import Row, read_server_metrics
from harness.tools.predict import predict_runs
from harness.twin.curve import MIN_STEPS, fit_curve, nonnegative
from harness.twin.samples import Streams, overlapping, server_batches, step_samples
from harness.yamlfile import read_yaml

UNMEASURED_KV_TOKENS = 10_000_000  # no KV usage scraped: the twin never runs out


def _design(samples: np.ndarray, weights_ms: float, per_ktoken_ms: float) -> tuple[np.ndarray, np.ndarray]:
    """With the roofline part fixed, the rest is linear: y − hypot(…) = step + per_seq·seqs + per_context·ctx
    + prompt_step·[the step processed prompt tokens]."""
    tokens_k = samples[:, 1] / 1e3 + samples[:, 3]  # one decode token a sequence, and the prompts prefilled
    y = samples[:, 0] - np.hypot(weights_ms, per_ktoken_ms * tokens_k)
    prompts = (samples[:, 3] > 0).astype(np.float64)
    return np.column_stack([np.ones(len(samples)), samples[:, 1], samples[:, 2], prompts]), y


def _search(samples: np.ndarray, weights: np.ndarray, per_ktoken: np.ndarray) -> tuple[float, float, float]:
    """The (weights, per_ktoken) pair of the grids whose linear remainder fits best: (error, weights,
    per_ktoken)."""
    best = (np.inf, 0.0, 0.0)
    for w in weights:
        for k in per_ktoken:
            x, y = _design(samples, float(w), float(k))
            coef = nonnegative(x, y)
            err = float(np.mean((y - x @ coef) ** 2))
            if err < best[0]:
                best = (err, float(w), float(k))
    return best


def fit_steps(samples: np.ndarray, prompt_ms_per_ktoken: float | None = None) -> dict[str, float]:
    """The step model's five coefficients: a grid search over the roofline part (the weights' read time and
    the compute time per 1,000 tokens, blended as the simulator blends them), least squares with no
    coefficient below zero for the rest; then once more without the gaps more than five median deviations off
    the fit. `prompt_ms_per_ktoken`: the server's own timing of its prompts (llama.cpp's), which then fixes
    the compute per 1,000 tokens instead of the search."""
    gaps = samples[:, 0]
    weights = np.linspace(0.0, float(np.percentile(gaps, 5)), 24)
    # Up to 20 s per 1,000 tokens: a CPU processes a prompt at a few hundred tokens/s (llama.cpp on 2 cores:
    # ~3,300–6,500 ms per 1k), a GPU at tens of thousands.
    per_ktoken = (np.array([prompt_ms_per_ktoken]) if prompt_ms_per_ktoken is not None
                  else np.concatenate([[0.0], np.geomspace(0.1, 20_000.0, 64)]))
    _, w, k = _search(samples, weights, per_ktoken)
    for _ in range(2):  # refine around the best point
        weights = np.linspace(max(0.0, w * 0.8), w * 1.2 + 1e-6, 9)
        if prompt_ms_per_ktoken is None:
            per_ktoken = np.linspace(max(0.0, k * 0.8), k * 1.2 + 1e-6, 9)
        _, w, k = _search(samples, weights, per_ktoken)
    x, y = _design(samples, w, k)
    residual = y - x @ nonnegative(x, y)
    # Stalls are five median deviations off; never closer than 1% of the median gap (exact data has none).
    mad = max(float(np.median(np.abs(residual - np.median(residual)))), 0.01 * float(np.median(gaps)))
    kept = samples[np.abs(residual) <= 5 * mad]
    x, y = _design(kept, w, k)
    coef = nonnegative(x, y)
    step, per_seq, per_context, prompt_step = (float(c) for c in coef)
    # How well the model explains every gap, stalls included: a wrong attribution of the prompts leaves their
    # long steps unexplained (the refit above would drop them as outliers and look better than it is).
    x_all, y_all = _design(samples, w, k)
    return {"step_ms": step, "weights_ms": w, "per_ktoken_ms": k, "per_seq_ms": per_seq,
            "per_context_ktoken_ms": per_context, "prompt_step_ms": prompt_step,
            "rms_ms": float(np.sqrt(np.mean((y_all - x_all @ coef) ** 2)))}


KV_MIN_USAGE = 0.05  # below this the cache holds too few blocks for held tokens / usage to mean much
KV_FULL = 0.9  # requests waiting while the cache is this full wait for memory, not for a slot


def kv_capacity(records: Sequence[RequestRecord], rows: Sequence[Row]) -> int | None:
    """Tokens held / KV usage over the scrapes where the cache was at least 5% used and nothing waited (so
    every request sent and not finished held its blocks, being prefilled or decoding); None if there were
    none."""
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
    server_prompt_ms_per_ktoken: float | None = None  # the server's own account (llama.cpp's timings), median

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


def server_prompt_rate(records: Sequence[RequestRecord]) -> float | None:
    """ms per 1,000 prompt tokens as the server timed its own prompt processing (llama.cpp's `timings`): the
    median over the requests that said so, had 64 or more tokens to process, and were alone in it — no other
    request between its send and its first token (a prompt batched with others is timed for the whole
    batch)."""
    timed = [r for r in records if r.server_prompt_ms is not None and r.sent_ns is not None
             and r.first_token_ns is not None and (r.prompt_tokens or 0) - (r.cached_tokens or 0) >= 64]
    spans = [(r.sent_ns or 0, r.first_token_ns or 0) for r in records
             if r.sent_ns is not None and r.first_token_ns is not None]
    rates = [(r.server_prompt_ms or 0.0) / ((r.prompt_tokens or 0) - (r.cached_tokens or 0)) * 1e3
             for r, n in zip(timed, overlapping(spans, [(r.sent_ns or 0, r.first_token_ns or 0) for r in timed]),
                             strict=True) if n == 1]  # itself only
    return float(np.median(rates)) if len(rates) >= 5 else None


NONLINEAR = 0.10  # a decode step this far off the line at a measured batch size: the table replaces the line


def fit_runs(run_dirs: Sequence[Path], name: str, model: str | None = None, slots: int | None = None,
             batch_tokens: int | None = None, kv_said: int | None = None) -> Fit:
    """`kv_said`: the KV cache's capacity as the engine said it (vLLM's cache_config_info), taken over the
    estimate from usage."""
    records = [rec for d in run_dirs for rec in _records(d)]
    shapes = {lead: step_samples(records, lead) for lead in (0, 1)}
    if len(shapes[0]) < 20:
        raise ScenarioError(f"{', '.join(map(str, run_dirs))}: too few streamed tokens to fit ({len(shapes[0])} "
                            "gaps; runs need ok requests of two or more chunks)")
    scraped = [read_server_metrics(d) for d in run_dirs]
    kv = [k for d, rows in zip(run_dirs, scraped, strict=True)
          if (k := kv_capacity(list(_records(d)), rows)) is not None]
    usage = [v for rows in scraped for r in rows if (v := r.values.get("kv_cache_usage")) is not None]
    # Which step a first token leaves with is the engine's (vLLM: its prompt's; llama.cpp: the next): the
    # attribution whose step times the model explains better.
    said = server_prompt_rate(records)  # the server's own prompt timing: a check of the fit (its samples are in)
    fits = {lead: fit_steps(samples) for lead, samples in shapes.items()}
    lead = min(fits, key=lambda k: fits[k]["rms_ms"])
    f = fits[lead]
    kv_tokens = kv_said or (int(np.median(kv)) if kv else UNMEASURED_KV_TOKENS)
    line = FittedAccelerator(name, kv_tokens=kv_tokens, slots=slots or queue_cap(scraped), batch_tokens=batch_tokens,
                             first_token_step=lead, fitted_rps=offered_range(run_dirs), step_ms=f["step_ms"],
                             weights_ms=f["weights_ms"], per_ktoken_ms=f["per_ktoken_ms"], per_seq_ms=f["per_seq_ms"],
                             per_context_ktoken_ms=f["per_context_ktoken_ms"], prompt_step_ms=f["prompt_step_ms"])
    steps = replace(with_table(line, shapes[lead], records), fitted_batch=batch_span(shapes[lead]),
                    fitted_prompt_tokens=prompt_span(records))
    return Fit(replace(steps, request_ms=request_overhead_ms(steps, run_dirs, model)), len(shapes[lead]),
               bool(kv or kv_said),
               max(usage) if usage else None, said)


def with_table(line: FittedAccelerator, samples: np.ndarray, records: Sequence[RequestRecord]) -> FittedAccelerator:
    """The fitted line, or the decode table (`twin_curve`) where the decode steps the runs measured depart
    from the line by more than `NONLINEAR` at some batch size; its prompt terms from the server's own timing
    of its prompt batches where it gave one."""
    timed = server_batches([r for r in records if r.status == "ok" and r.server_prompt_ms is not None
                            and len(r.chunk_ns) >= 3], Streams.of(records), line.first_token_step)
    curve = fit_curve(samples, np.asarray(timed, dtype=np.float64).reshape(-1, 5))
    if curve is None or curve.departure(lambda n, context_k: line.line_decode_ms(n, context_k * 1e3)) <= NONLINEAR:
        return line
    return replace(line, step_ms=0.0, weights_ms=0.0, per_context_ktoken_ms=0.0, per_seq_ms=curve.per_seq_ms,
                   per_ktoken_ms=curve.per_ktoken_ms, prompt_step_ms=curve.prompt_step_ms,
                   prompt_beside=round(curve.prompt_beside, 4), prompt_together=round(curve.prompt_together, 4),
                   prompt_attn_ms=round(curve.prompt_attn_ms, 4), prompt_step_shared=curve.prompt_step_shared,
                   decode_ms=[round(v, 3) for v in curve.decode_ms])


def batch_span(samples: np.ndarray) -> list[int] | None:
    """The fewest and the most sequences decoding in a step that the runs timed in enough steps to trust."""
    plain = samples[samples[:, 3] == 0]
    counts = np.round(plain[:, 1] - plain[:, 4]).astype(np.int64)
    sizes, seen = np.unique(counts[counts > 0], return_counts=True)
    timed = sizes[seen >= MIN_STEPS]
    return [int(timed.min()), int(timed.max())] if len(timed) else None


def prompt_span(records: Sequence[RequestRecord]) -> list[int] | None:
    lengths = [n for r in records if r.status == "ok" and (n := r.prompt_tokens or r.prompt_tokens_requested)]
    return [min(lengths), max(lengths)] if lengths else None


def queue_cap(scraped: Sequence[Sequence[Row]]) -> int | None:
    """The engine's concurrency, where the runs show it: a plateau of running requests while others waited and
    the KV cache had room — at least half the scrapes that saw a queue saw the most requests ever running, as
    a slot cap holds them (requests waiting for a step's token budget, or for memory, leave no such plateau);
    None when the runs show none."""
    rows = [r.values for rows in scraped for r in rows if "running" in r.values]
    if not rows:
        return None
    top = max(v["running"] for v in rows)
    queued = [v["running"] for v in rows if v.get("waiting", 0.0) > 0 and v.get("kv_cache_usage", 0.0) < KV_FULL]
    at_top = sum(abs(r - top) < 0.5 for r in queued)
    return round(top) if queued and at_top >= max(2, len(queued) / 2) else None


def offered_range(run_dirs: Sequence[Path]) -> list[float] | None:
    """The lowest and the highest offered rate (requests/s) of the fitted runs' open-loop phases (a closed
    loop's sending rate is its engine's, not a load it was offered)."""
    rates = [p.load.offered_rps for d in run_dirs if (d / "summary.json").is_file()
             for p in read_summary(d / "summary.json").phases if p.load.offered_rps and p.load.target_rps]
    return [round(min(rates), 4), round(max(rates), 4)] if rates else None


MIN_ALONE_REQUESTS = 5  # requests that had the engine to themselves it takes to price the time outside the steps


def request_overhead_ms(steps_only: FittedAccelerator, run_dirs: Sequence[Path], model: str | None) -> float:
    """The time a request spends outside the engine's steps: the median, over the ok requests of the fitted
    runs, of its measured less its replayed TTFT on the steps alone (never below zero). A step fit cannot see
    it: it lies between the client's send and the engine's admission, and between the first token's step and
    the client's read. Only requests that had the engine to themselves count where there are enough of them:
    under a queue the replay's own errors land in the difference (llama-server: +64 ms from loaded runs, ~0
    alone)."""
    with within(catalogue().with_devices(steps_only)):  # the fit's own device, for these replays only
        short = [gap for d in run_dirs for gap in _ttft_shortfall_ms(d, steps_only.name, model)]
    alone = [t for t, lone in short if lone]
    chosen = alone if len(alone) >= MIN_ALONE_REQUESTS else [t for t, _ in short]
    return max(0.0, float(np.median(chosen))) if chosen else 0.0


def _ttft_shortfall_ms(run_dir: Path, accelerator: str, model: str | None) -> list[tuple[float, bool]]:
    """Measured less replayed TTFT of each request answered in both, matched by phase and index, and whether
    no other request was in flight between its send and its first token."""
    def ttft(rec: RequestRecord) -> float | None:
        if rec.status != "ok" or rec.first_token_ns is None or rec.sent_ns is None:
            return None
        return (rec.first_token_ns - rec.sent_ns) / 1e6

    _, runs = asyncio.run(predict_runs(on_twin(load_scenario(run_dir / "scenario.yaml"), accelerator, model)))
    replayed = {(r.phase, r.index): t for run in runs for r in run.records if (t := ttft(r)) is not None}
    records = _records(run_dir)
    spans = [(r.sent_ns, r.chunk_ns[-1] if r.chunk_ns else r.sent_ns) for r in records if r.sent_ns is not None]
    matched = [(r, t - replayed[key]) for r in records
               if (t := ttft(r)) is not None and (key := (r.phase, r.index)) in replayed]
    windows = [(r.sent_ns or 0, r.first_token_ns or 0) for r, _ in matched]
    company = overlapping(spans, windows) if matched else np.zeros(0)
    return [(gap, bool(n == 1)) for (_, gap), n in zip(matched, company, strict=True)]


def _records(run_dir: Path) -> list[RequestRecord]:
    path = run_dir / "requests.jsonl"
    if not path.is_file():
        raise ScenarioError(f"{run_dir}: not a run directory (no requests.jsonl)")
    return list(read_records(path))


def on_twin(scenario: Scenario, accelerator: str, model: str | None) -> Scenario:
    data = scenario.simulator.model_dump(mode="json")
    for key in ("max_num_seqs", "max_num_batched_tokens", "tp", "weights"):
        data.pop(key)  # the twin's own; its step times hold the endpoint's parallelism and weight type
    sim = scenario.simulator.model_validate({**data, "accelerator": accelerator,
                                             "model": model or scenario.simulator.model})
    return scenario.changed(simulator=sim)


def load_twin(preset: Path, accelerator: str | None) -> str:
    """Load a fitted preset file; the accelerator to use (the file's only fitted one when not named)."""
    use(catalogue().refreshed(preset))
    data = cast(dict[str, Any], read_yaml(preset) or {})  # checked by the catalogue just now: a mapping
    entries = (data.get("accelerators") or {}).items()
    fitted = [n for n, e in entries if isinstance(e, dict) and e.get("kind") == "fitted"]
    if accelerator is None:
        if len(fitted) != 1:
            raise ScenarioError(f"{preset}: holds {len(fitted)} fitted accelerators; name one with --accelerator")
        return str(fitted[0])
    return accelerator


def known_model(model: str | None) -> str | None:
    if model is not None and model not in catalogue().models:
        raise ScenarioError(f"--model: unknown model {model!r}; known: {', '.join(sorted(catalogue().models))}")
    return model
