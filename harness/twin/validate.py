"""How well a fitted twin holds: each run replayed on it in virtual time beside what the run measured (`sim
fit` prints this for the runs it was fitted to, `sim validate` for any other), where the fit's assumptions
failed, and which loads lie outside the ones it was fitted to."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from harness.config.load import BatchLoad, ConcurrencyLoad
from harness.config.metric_registry import Latency, Metric, having, of
from harness.config.scenario import Scenario, load_scenario
from harness.config.workload import Length
from harness.devices.catalogue import catalogue
from harness.devices.fitted import FittedAccelerator
from harness.run.target import high, low
from harness.stats.schema import read_summary
from harness.stats.thresholds import observed
from harness.tools.predict import predict
from harness.twin.fit import Fit, on_twin

# The figures a twin is judged on (rows name them by their registry label)
VALIDATED = having("validated")
_BY_LABEL = {m.label: m for m in VALIDATED}
TTFT_P50 = of(Latency.TTFT, "p50")


class ValidationRow(TypedDict):
    """One figure of one phase of a run: measured, predicted by the twin, and the error (None: no data)."""

    run: str
    phase: str
    figure: str
    measured: float | None
    predicted: float | None
    error: float | None
    untrusted: bool  # the client could have moved the measured figure (its phase's client_limited_metrics)


def validate_run(run_dir: Path, accelerator: str, model: str | None = None) -> list[ValidationRow]:
    """Per phase of the run: each compared figure, measured and predicted on `accelerator`, and the error."""
    measured = read_summary(run_dir / "summary.json")
    predicted = predict(on_twin(load_scenario(run_dir / "scenario.yaml"), accelerator, model))
    rows: list[ValidationRow] = []
    for m, p in zip(measured.phases, predicted.phases, strict=True):
        for entry in VALIDATED:
            got, want = observed(entry.name, p), observed(entry.name, m)
            error = None if got is None or not want else got / want - 1
            rows.append({"run": str(run_dir), "phase": m.name, "figure": entry.label, "measured": want,
                         "predicted": got, "error": error, "untrusted": m.untrusted(entry.name)})
    return rows


# A fit is trusted when it reproduces its own runs this closely (the acceptance, as in
# docs/simulator.md)
P50_TOLERANCE, P99_TOLERANCE = 0.15, 0.30


def validated(figure: str) -> Metric | None:
    """The registry's entry of a row's figure (None: not a validated figure)."""
    return _BY_LABEL.get(figure)


def bound(figure: str) -> float:
    """The error a figure is held to: a tail's wider than a median's or a rate's."""
    entry = validated(figure)
    return P99_TOLERANCE if entry is not None and not entry.central else P50_TOLERANCE


def misses(rows: Sequence[ValidationRow]) -> list[ValidationRow]:
    """Rows beyond their bound (none for a figure without data, or one the client could have moved)."""
    return [r for r in rows if r["error"] is not None and not r["untrusted"] and abs(r["error"]) > bound(r["figure"])]


def fit_warnings(fit: Fit, rows: Sequence[ValidationRow]) -> list[str]:
    """Where the fit's assumptions failed, in words: a large time outside the steps (the step model did not
    explain the first tokens), no KV series, its own runs missed, an error that moves with the load."""
    a, out = fit.accelerator, []
    ttft = [r["measured"] for r in rows if r["figure"] == TTFT_P50.label and r["measured"]]
    if ttft and a.request_ms > 0.25 * min(ttft):
        out.append(f"{a.request_ms:,.0f} ms of every request lies outside the fitted steps, over a quarter of the "
                   f"lowest TTFT p50 measured ({min(ttft):,.0f} ms): the step model does not explain the first "
                   "tokens (prompts processed where the fit cannot see them?); its TTFT tail and its queueing are not "
                   "to be trusted")
    if not fit.kv_measured:
        out.append(f"KV capacity not measured{fit.kv_note.removeprefix(' (not measured').rstrip(')')}: the twin "
                   "never runs out of KV cache")
    if missed := misses(rows):
        worst = max(missed, key=lambda r: abs(r["error"] or 0.0))
        out.append(f"the fit misses {len(missed)} of its own figures beyond ±{P50_TOLERANCE:.0%} (p50, tokens/s) or "
                   f"±{P99_TOLERANCE:.0%} (p99); worst: {worst['figure']} of {Path(worst['run']).name} / "
                   f"{worst['phase']} {worst['error']:+.0%}")
    said = fit.server_prompt_ms_per_ktoken
    if said is not None and not 0.5 <= (a.per_ktoken_ms or 1e-9) / said <= 2.0:
        out.append(f"the server timed its own prompt processing at {said:,.0f} ms per 1k tokens; the fit found "
                   f"{a.per_ktoken_ms:,.0f}: the step model misplaces the prompts' cost")
    spread = [r["error"] for r in rows if r["figure"] == TTFT_P50.label and r["error"] is not None]
    if len(spread) >= 2 and max(spread) - min(spread) > 0.30:
        out.append(f"the TTFT p50 error moves with the run ({min(spread):+.0%} to {max(spread):+.0%}): a term the "
                   "model lacks grows with load (slots, a queue, prompts stalling the decode)")
    return out


def outside_fitted(run_dir: Path, accelerator: str) -> list[str]:
    """Phases of a run whose load the fit never saw: a rate outside the fitted runs' by over 10% (below them
    is inside where the fit timed decode steps from one sequence up); a closed loop or fixed batch of more
    requests than the fit timed decode steps of (any, when it saw only open-loop rates); prompts longer or
    shorter than the fitted ones by over 10%."""
    device = catalogue().devices[accelerator].twin
    if device is None:
        return []
    scenario = load_scenario(run_dir / "scenario.yaml")
    loads = {p.name: p.load for p in scenario.phases}
    out = [f"{run_dir.name} / {phase.name}: {beyond}" for phase in read_summary(run_dir / "summary.json").phases
           if (beyond := _outside_load(device, phase.load.offered_rps, loads.get(phase.name))) is not None]
    if (prompts := _outside_prompts(device, scenario.workload.prompt_tokens)) is not None:
        out.append(f"{run_dir.name}: {prompts}")
    return out


def outside_envelope(scenario: Scenario) -> list[str]:
    """What `predict` says before predicting on a fitted twin: each phase whose load, and the prompts, lie
    outside what the twin was fitted on (the same rules as `outside_fitted`, on the scenario's own rates)."""
    known = catalogue().devices.get(scenario.simulator.accelerator)
    device = known.twin if known is not None else None
    if device is None:
        return []
    out = [f"{phase.name}: {beyond}" for phase in scenario.phases
           if (beyond := _outside_load(device, getattr(phase.load, "rate", None), phase.load)) is not None]
    if (prompts := _outside_prompts(device, scenario.workload.prompt_tokens)) is not None:
        out.append(prompts)
    return out


def _outside_prompts(device: FittedAccelerator, prompts: Length) -> str | None:
    span = device.fitted_prompt_tokens
    shortest, longest = low(prompts), high(prompts)
    if span is None or (shortest >= 0.9 * span[0] and longest is not None and longest <= 1.1 * span[1]):
        return None
    lengths = f"{shortest:,}" if longest == shortest else f"{shortest:,}–{'?' if longest is None else f'{longest:,}'}"
    return f"prompts of {lengths} tokens; the fit saw {span[0]:,}–{span[1]:,}"


def _outside_load(device: FittedAccelerator, rate: float | None, load: object) -> str | None:
    """Why a phase's load lies outside the fitted envelope, or None."""
    size = load.concurrency if isinstance(load, ConcurrencyLoad) else load.size if isinstance(load, BatchLoad) else None
    if size is not None and device.fitted_batch is not None:
        if size <= device.fitted_batch[1]:
            return None
        return f"{size} requests at once; the fit timed decode steps of up to {device.fitted_batch[1]} sequences"
    if device.fitted_rps is None:
        return None
    lowest, highest = device.fitted_rps
    if rate is None:
        return f"not an open-loop rate; the fit saw {lowest:g}–{highest:g} req/s offered"
    # With the batch sizes timed from one up, a lighter load than the heaviest fitted holds nothing they
    # lacked.
    floor = 0.0 if device.fitted_batch is not None and device.fitted_batch[0] == 1 else 0.9 * lowest
    if not floor <= rate <= 1.1 * highest:
        return f"{rate:g} req/s offered lies outside the fitted {lowest:g}–{highest:g} req/s"
    return None
