"""The plain-language conclusion of an interactive-versus-batch run, computed from its phases.

Each fixed-batch phase is compared with an interactive (open-loop) phase on throughput and time to first
token. A ratio to an interactive run depends on the rate it was offered (at 0.5 req/s any batch "gains"),
so the comparison is made at the interactive phase's measured capacity — the knee of a sweep of it in the
same run: its fastest point still meeting the SLOs for 95% of requests — and, without a sweep, the sentence
says the ratio holds only at the rate offered. The sentences only restate numbers that are in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.metric_registry import LATENCIES, SLO_LATENCIES
from harness.stats.schema import Comparison, PhaseComparison, PhaseSummary, Stress
from harness.stats.schema.sweeps import KNEE_GOODPUT, find_sweeps

_OPEN_LOOP = {"poisson", "gamma", "constant", "ramp", "trace"}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _interactive(phases: Sequence[PhaseSummary]) -> tuple[PhaseSummary | None, bool]:
    """The phase to compare batches with, and whether it is a measured capacity."""
    for sweep in find_sweeps(phases):
        if sweep.points[0].load_kind in _OPEN_LOOP and sweep.knee is not None:
            return sweep.knee, True
    return next((p for p in phases if p.load_kind in _OPEN_LOOP and p.requests.ok), None), False


def comparisons(phases: Sequence[PhaseSummary]) -> list[PhaseComparison]:
    """For each batch phase: its throughput and TTFT ratios to the interactive phase."""
    interactive, at_capacity = _interactive(phases)
    if interactive is None:
        return []
    i_lat = interactive.latency_ms
    return [
        PhaseComparison(
            phase=p.name, batch_size=p.batch_size, versus=interactive.name,
            throughput_ratio=_ratio(p.throughput.output_tokens_per_s, interactive.throughput.output_tokens_per_s),
            ttft_p50_ratio=_ratio(p.latency_ms.ttft.p50, i_lat.ttft.p50),
            ttft_p99_ratio=_ratio(p.latency_ms.ttft.p99, i_lat.ttft.p99),
            itl_p50_ratio=_ratio(p.latency_ms.itl.p50, i_lat.itl.p50),
            goodput_fraction=p.goodput.fraction, interactive_goodput_fraction=interactive.goodput.fraction,
            at_capacity=at_capacity,
            versus_offered_rps=interactive.load.target_rps or interactive.load.offered_rps,
            waiting_max=p.server.waiting_max if p.server is not None else None,
            stress=p.stress, interactive_stress=interactive.stress,
            inputs_ratio=_ratio(p.throughput.inputs_per_s, interactive.throughput.inputs_per_s),
            e2e_p99_ratio=_ratio(p.latency_ms.e2e.p99, i_lat.e2e.p99),
        )
        for p in phases if p.load_kind == "batch" and p.requests.ok
    ]


def sentences(comps: Sequence[PhaseComparison]) -> list[str]:
    lines = []
    for c in comps:
        if c.throughput_ratio is None and c.inputs_ratio is not None and c.e2e_p99_ratio is not None:
            lines.append(_pooled(c))  # nothing generated on either side: embeddings
            continue
        if c.throughput_ratio is None or c.ttft_p99_ratio is None:
            continue
        versus = (f"the interactive run at its measured capacity ({c.versus}, the fastest sweep point with "
                  f"≥ {KNEE_GOODPUT:.0%} goodput)" if c.at_capacity else "the interactive run")
        line = (f"Batches of {c.batch_size} deliver {c.throughput_ratio:.1f}× the output tokens/s of {versus}, "
                f"at {c.ttft_p99_ratio:.1f}× its p99 TTFT")
        if c.itl_p50_ratio is not None:
            line += f" and {c.itl_p50_ratio:.1f}× its median inter-token latency"
        line += (f"; {c.goodput_fraction:.0%} of batched requests meet the SLOs, against "
                 f"{c.interactive_goodput_fraction:.0%} interactive.")
        if c.waiting_max:
            line += (f" Up to {c.waiting_max:.0f} batched requests waited in the server's queue: the batch is "
                     "larger than the server runs at once, so part of its TTFT is queueing.")
        line += _why(c.interactive_stress, c.stress)
        if not c.at_capacity and c.versus_offered_rps is not None:
            line += (f" The ratio holds at the {c.versus_offered_rps:.2f} req/s the interactive run was offered; "
                     "sweep its rate to compare at its capacity.")
        lines.append(line)
    return lines


def _pooled(c: PhaseComparison) -> str:
    """The sentence where neither side generated a token (embeddings): texts per second and end-to-end
    latency, for a batch that is one request carrying `batch_size` texts."""
    assert c.inputs_ratio is not None and c.e2e_p99_ratio is not None
    return (f"Batches of {c.batch_size} texts embed {c.inputs_ratio:.1f}× the texts/s of the interactive run, at "
            f"{c.e2e_p99_ratio:.1f}× its p99 end-to-end latency; {c.goodput_fraction:.0%} of batched requests meet "
            f"the SLOs, against {c.interactive_goodput_fraction:.0%} interactive.{_stress(c)}"
            + (f" The ratio holds at the {c.versus_offered_rps:.2f} req/s the interactive run was offered."
               if not c.at_capacity and c.versus_offered_rps is not None else ""))


def _stress(c: PhaseComparison) -> str:
    """Where each side's step time went, said plainly (a prompt alone is not the few-token decode `_why`
    explains)."""
    if c.interactive_stress is None or c.stress is None or None in (c.interactive_stress.memory_bound_share,
                                                                    c.stress.memory_bound_share):
        return ""
    return f" Step time: interactive {_bound(c.interactive_stress)}, batches {_bound(c.stress)}."


def _bound(stress: Stress) -> str:
    mbu = "" if stress.mbu is None else f"MBU {stress.mbu:.0%}, "
    mfu = "" if stress.mfu is None else f"MFU {stress.mfu:.1%}"
    return f"{stress.memory_bound_share:.0%} memory-bound ({(mbu + mfu).rstrip(', ')})"


def _why(interactive: Stress | None, batch: Stress | None) -> str:
    """Why the batch gains: how much of each phase's step time read memory rather than computed."""
    if interactive is None or batch is None or None in (interactive.memory_bound_share, batch.memory_bound_share):
        return ""
    where = ("an estimate, not a measurement" if "estimate" in (interactive.source, batch.source)
             else "on the simulated accelerator")
    return (f" Why ({where}): the interactive run's step time was {_bound(interactive)}, each step "
            f"reading all the weights for a few tokens, against {_bound(batch)} for the batches, whose tokens share "
            "each read.")


def decided_by(phase: PhaseSummary) -> str:
    """What kept a phase's requests out of its goodput: the SLO limit most of them went over (TTFT, TPOT, E2E;
    several when they tie), or errors when failures outnumber every limit's misses; '' when nothing did."""
    missed = {LATENCIES[latency].label: phase.goodput.missed.get(key, 0) for key, latency in SLO_LATENCIES}
    most = max(missed.values(), default=0)
    if phase.requests.failed > most:
        return "errors"
    return "+".join(label for label, n in missed.items() if n == most) if most else ""


def phase_sentence(p: PhaseSummary) -> str:
    """What one phase delivered, for a run with no batch to compare: its rate, the latencies users feel and,
    when SLOs were set, the share within them. A phase that streamed thinking names both first tokens: the
    thinking one, and the answer's a chat user waits for."""
    lat = p.latency_ms
    said = [f"{p.throughput.output_tokens_per_s:,.0f} output tokens/s at {p.throughput.requests_per_s:.2f} req/s"]
    if pooled(p):
        said = [f"{p.throughput.inputs_per_s or 0:,.1f} texts/s ({p.throughput.total_tokens_per_s:,.0f} prompt "
                f"tokens/s) at {p.throughput.requests_per_s:.2f} req/s"]
        if lat.e2e.p99 is not None:
            said.append(f"E2E p99 {lat.e2e.p99:,.0f} ms")
    if lat.ttft.p99 is not None and thought(p) and lat.ttft_answer.p99 is not None:
        said.append(f"TTFT p99 {lat.ttft.p99:,.0f} ms to the first thinking token, {lat.ttft_answer.p99:,.0f} ms "
                    "to the answer's")
    elif lat.ttft.p99 is not None:
        said.append(f"TTFT p99 {lat.ttft.p99:,.0f} ms")
    elif not pooled(p) and lat.e2e.p99 is not None:  # answers asked for whole: their end is all there is
        said.append(f"E2E p99 {lat.e2e.p99:,.0f} ms (answers unstreamed)")
    if lat.itl.p50 is not None:
        said.append(f"ITL p50 {lat.itl.p50:,.1f} ms")
    judged = [LATENCIES[latency].label for key, latency in SLO_LATENCIES if getattr(p.goodput.slo, key) is not None]
    within = f"; {p.goodput.fraction:.0%} of requests within the SLOs ({', '.join(judged)})" if judged else ""
    failed = p.requests.failed
    errors = f"; {failed} of {p.requests.total} requests failed" if failed else ""
    return f"{p.name}: {', '.join(said)}{within}{errors}."


def pooled(p: PhaseSummary) -> bool:
    """Whether the phase's answers generated nothing (embeddings): texts and prompt tokens are its work."""
    return p.requests.ok > 0 and p.tokens.output == 0 and p.latency_ms.ttft.p99 is None


def thought(p: PhaseSummary) -> bool:
    """Whether the phase streamed a reasoning model's thinking: its first token was not its answer's."""
    return p.tokens.reasoning_reported > 0


def compare(phases: Sequence[PhaseSummary]) -> Comparison:
    """The batch phases against the interactive one; none built on an incomplete phase (stopped, late, a shard
    lost in it), whose load was not the one planned: the conclusion says why instead."""
    comps = comparisons(phases)
    kept = [c for c in comps if not _partial(phases, c.phase, c.versus)]
    refused = [f"No ratio of {c.phase} to {c.versus}: {why}; a ratio built on it would say what the run did not "
               "measure." for c in comps if (why := _partial(phases, c.phase, c.versus))]
    return Comparison(phases=kept, conclusion=sentences(kept) + refused)


def _partial(phases: Sequence[PhaseSummary], *names: str) -> str:
    """Why the named phases cannot be compared ('' when they can): each incomplete one, with its reason."""
    return "; ".join(f"{p.name} is incomplete ({p.incomplete})" for p in phases if p.name in names and p.incomplete)
