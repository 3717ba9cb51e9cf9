"""When a new request joins the engine's steps: the step after the one running (vLLM on a CPU, whose platform
turns async scheduling off; llama.cpp) or the one after that (vLLM's async scheduling, on by default on GPUs,
where the host prepares step n+1 while the device runs step n). No endpoint says which. Under an open-loop
load the two differ by a step's time in nearly every TTFT; a closed loop or a batch barely tells them apart.
So `sim twin` replays its fitted Poisson load both ways and keeps the rule whose TTFT p50 lies clearly closer
to what was measured; where the two lie within `MARGIN` of each other the load cannot tell them apart, and the
simulator's own rule stands (llama-server: 31% one way, 35% the other, its fitted Poisson load missed for
another reason)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.twin.checks import Finding
from harness.twin.fit import Fit, load_twin
from harness.twin.validate import TTFT_P50, validate_run

MARGIN = 0.05  # the mean |TTFT p50 error| one rule must beat the other's by to be taken


def ttft_error(fit: Fit, rule: bool, out: Path, name: str, sources: Sequence[Path], poisson: Sequence[Path]
               ) -> float | None:
    """The mean |TTFT p50 error| of the Poisson runs on the twin with this rule (its preset written to
    `out`)."""
    trial = replace(fit, accelerator=replace(fit.accelerator, async_scheduling=rule))
    out.write_text(trial.preset_yaml(sources), encoding="utf-8")
    accelerator = load_twin(out, name)
    errors = [abs(row["error"]) for d in poisson for row in validate_run(d, accelerator)
              if row["figure"] == TTFT_P50.label and row["error"] is not None]
    return sum(errors) / len(errors) if errors else None


def admission(fit: Fit, out: Path, name: str, sources: Sequence[Path], poisson: Sequence[Path]
              ) -> tuple[Fit, Finding | None]:
    """The fit with the admission rule its Poisson runs support, written to `out`, and what was found; the fit
    as it was (the simulator's own rule) where no Poisson run gave a TTFT to tell them by."""
    errors = {rule: ttft_error(fit, rule, out, name, sources, poisson) for rule in (False, True)}
    off, on = errors[False], errors[True]
    if off is None or on is None or abs(off - on) < MARGIN:
        out.write_text(fit.preset_yaml(sources), encoding="utf-8")
        told = None if off is None or on is None else Finding(
            "admission", f"the fitted Poisson load cannot tell which step a new request joins (TTFT p50 off by "
            f"{off:.0%} joining the next step, {on:.0%} the one after): the simulator's own rule stands")
        return fit, told
    best = min(errors, key=lambda rule: errors[rule] or 0.0)
    chosen = replace(fit, accelerator=replace(fit.accelerator, async_scheduling=best))
    out.write_text(chosen.preset_yaml(sources), encoding="utf-8")
    said = {False: "the step after the one running", True: "the step after next (async scheduling)"}
    return chosen, Finding("admission", f"a new request joins {said[best]}: the fitted Poisson load's TTFT p50 "
                           f"is off by {errors[best]:.0%} that way and {errors[not best]:.0%} the other")
