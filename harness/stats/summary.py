"""summary.json put together in one place, typed (harness.stats.schema): each phase's entry from its
records, the server series over each phase, then the comparison of the phases. One way for a live run,
`harness report` and `harness predict`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.config.load import BatchLoad, ConcurrencyLoad, Phase, RampLoad, TraceLoad
from harness.config.metric_registry import LATENCIES, SLO_LATENCIES
from harness.config.scenario import Scenario
from harness.records import RequestRecord
from harness.stats.conclusion import compare
from harness.stats.phase import PhaseFold, fold_phase
from harness.stats.schema import (
    ClientHealth,
    Connections,
    PhaseStats,
    PhaseSummary,
    RunHeader,
    ScrapeInfo,
    ServerPhase,
    ShardInfo,
    Stress,
    Summary,
    Tokens,
    TraceUse,
)
from harness.stats.server import Row, phase_server_summary
from harness.stats.stress import estimate, from_simulator, unestimated
from harness.stats.thresholds import evaluate
from harness.stats.verdict import ClientCheck
from harness.workload.shards import DISTORTED_MS, LATE_MS, skew_ms


@dataclass(frozen=True, slots=True)
class PhaseRun:
    """What one phase left behind: its records, the client's self-check while it ran, the trace it
    replayed."""

    phase: Phase
    records: Sequence[RequestRecord]
    client: ClientCheck | None = None
    trace: TraceUse | Mapping[str, object] | None = None  # as the plan (a dict) or a saved summary gave it
    stress: Stress | None = None  # known without scraping (`harness predict` reads its engine)
    let_go: tuple[PhaseFold, tuple[int, int]] | None = None  # records folded and let go (harness.stats.keep)


def phase_summary(scenario: Scenario, run: PhaseRun, rows: Sequence[Row] = (),
                  ceiling_tokens_per_s: float | None = None, served_model: str | None = None) -> PhaseSummary:
    phase = run.phase
    fold, span = run.let_go or (None, None)
    stats, fold = fold_phase(run.records, scenario.slo, scenario.client.schedule_lag_bound_ms,
                             warmup_s=phase.warmup_s, cooldown_s=phase.cooldown_s, client=run.client,
                             fold=fold, span=span)
    client = stats.client
    if ceiling_tokens_per_s is not None:
        # How close this phase came to what `harness calibrate` found this machine's client can take.
        share = stats.whole_run.throughput.output_tokens_per_s / ceiling_tokens_per_s
        client = ClientHealth(**{**dict(client), "ceiling_tokens_per_s": ceiling_tokens_per_s,
                                 "ceiling_share": share})
    whole = stats.whole_run.window
    server = ServerPhase(**phase_server_summary(rows, whole.start_ns, whole.end_ns)) if rows else None
    stress, unsaid = _stress(scenario, run, rows, stats, server, served_model)
    # Judged whole against the lag bounds (no per-figure estimate): excused where the lateness was small
    # beside what it measured. Judged figure by figure, the small lateness moved nothing already.
    excused = None if stats.client_limited_metrics else negligible_lateness(stats, server)
    pace = bottleneck(stats.client_limited, server)
    if excused is not None:  # the client's lateness was small beside what it measured
        why, queued = excused
        client = client.changed(verdict="ok")
        stats = stats.changed(client_limited=False, client_limited_reason=None, client=client)
        pace = "server" if queued else bottleneck(False, server)
        unsaid.append(why)
    trace = None if run.trace is None else TraceUse.model_validate(run.trace)
    load = stats.load.changed(target_rps=target_rate(scenario, phase, trace))
    return PhaseSummary(**{**dict(stats), "client": client, "load": load}, name=phase.name,
                        config=phase.model_dump(mode="json"),
                        trace=trace, server=server, stress=stress,
                        sessions=fold.turns.stats(),
                        warnings=phase_warnings(scenario, stats.tokens) + connect_warnings(stats.connections)
                        + media_warnings(fold.media, fold.whole_n) + folded_warnings(fold, scenario)
                        + usage_warnings(fold) + unjudged_warnings(scenario, stats) + unsaid,
                        thresholds=evaluate(scenario.thresholds, phase.thresholds, stats),
                        bottleneck=pace)


def _stress(scenario: Scenario, run: PhaseRun, rows: Sequence[Row], stats: PhaseStats, server: ServerPhase | None,
            served_model: str | None) -> tuple[Stress | None, list[str]]:
    """Where the phase's stress landed: the engine's own account (predict), the bundled simulator's scraped
    one, or an estimate for a declared accelerator — and, when that cannot be made, why (a warning)."""
    whole = stats.whole_run.window
    stress = run.stress or (from_simulator(rows, whole.start_ns, whole.end_ns) if rows else None)
    hardware = scenario.endpoint.hardware
    if stress is not None or hardware is None:
        return stress, []
    stress = estimate(hardware, served_model, stats, None if server is None else server.running_mean)
    said = None if stress is not None else unestimated(hardware, served_model, stats)
    return stress, [said] if said else []


# The harness's own lateness that cannot move a figure: event-loop lag p99 (how late a token may be stamped)
# under a tenth of the median ITL, schedule lag p99 (how late a request may be sent) under a twentieth of the
# median TTFT.
NEGLIGIBLE_LOOP_LAG = 0.10
NEGLIGIBLE_SCHEDULE_LAG = 0.05


def negligible_lateness(stats: PhaseStats, server: ServerPhase | None) -> tuple[str, bool] | None:
    """Why a phase the self-check found late is not client-limited after all, and whether the server kept a
    queue meanwhile (it then set the pace), or None: the harness's CPU was not full, its event-loop lag p99
    was under 10% of the median ITL and its schedule lag p99 under 5% of the median TTFT it measured, so it
    cannot have shaped them; when the server kept requests waiting (scraped), the server set the pace. Against
    a slow server on the same machine (llama.cpp on CPU takes every core) the harness waits for a CPU now and
    then: a few ms late on 50 ms tokens is not the client limiting the run."""
    client, lat = stats.client, stats.latency_ms
    if not stats.client_limited or client.verdict == "saturated":
        return None
    itl, ttft = lat.itl.p50, lat.ttft.p50
    loop, sent = client.loop_lag_p99_ms or 0.0, lat.schedule_lag.p99 or 0.0
    if itl is None or ttft is None or loop > NEGLIGIBLE_LOOP_LAG * itl or sent > NEGLIGIBLE_SCHEDULE_LAG * ttft:
        return None
    small = (f"the harness's event-loop lag p99 ({loop:.1f} ms) was under {NEGLIGIBLE_LOOP_LAG:.0%} of the median "
             f"ITL ({itl:.1f} ms) and its schedule lag p99 ({sent:.1f} ms) under {NEGLIGIBLE_SCHEDULE_LAG:.0%} of the "
             f"median TTFT ({ttft:.1f} ms): too little to shape them; the self-check had said: "
             f"{stats.client_limited_reason}")
    if server is not None and (server.waiting_max or 0) > 0:
        return (f"the server set the pace, not the client: it held up to {server.waiting_max:.0f} requests "
                f"waiting (mean {server.waiting_mean or 0:.1f}) while {small}"), True
    return f"not client-limited: {small}", False


def bottleneck(client_limited: bool, server: ServerPhase | None) -> Literal["client", "server"] | None:
    """Which side set the pace: a late client first (its figures are inflated whatever the server did), then a
    server that kept requests waiting (half a request on average: a queue most of the time)."""
    if client_limited:
        return "client"
    if server is not None and (server.waiting_mean or 0.0) >= 0.5:
        return "server"
    return None


def target_rate(scenario: Scenario, phase: Phase, trace: TraceUse | None) -> float | None:
    """The request rate the scenario asked of an open-loop phase (None where it asks for no rate)."""
    load = phase.load
    if scenario.workload.sessions is not None or isinstance(load, BatchLoad | ConcurrencyLoad):
        return None
    if isinstance(load, RampLoad):
        return (load.start_rate + load.end_rate) / 2
    if isinstance(load, TraceLoad):
        return None if trace is None else trace.offered_rate
    return float(load.rate)


def phase_warnings(scenario: Scenario, tokens: Tokens) -> list[str]:
    """Why a phase's figures may mislead: a cache share the scenario did not expect, prompts of other
    lengths."""
    out = []
    bound = scenario.workload.cached_share_warning
    if tokens.cached_share is not None and bound is not None and tokens.cached_share > bound:
        out.append(f"the server served {tokens.cached_share:.0%} of prompt tokens from its cache (above "
                   f"workload.cached_share_warning {bound:.0%}): TTFT is flattered by an earlier run's or this "
                   "run's reuse")
    if tokens.mismatched:
        out.append(f"{tokens.mismatched} ok answers carried another number of token chunks than the server's usage "
                   "said: usage decided their token counts and length checks (several tokens to a chunk is "
                   "legitimate, e.g. vLLM's stream interval; fewer tokens than claimed is not); client."
                   "continuous_usage counts each chunk's tokens exactly")
    if tokens.prompt_mismatched:
        out.append(f"{tokens.prompt_mismatched} of {tokens.prompt_reported} prompts counted other than asked by "
                   f"the server (mean {tokens.prompt_diff_mean:+.1f} tokens): give workload.tokenizer (a local "
                   "tokenizer.json, or 'server')")
    return out


def unjudged_warnings(scenario: Scenario, stats: PhaseStats) -> list[str]:
    """An SLO on a latency no ok answer of the phase had (answers that came whole have no first token): it
    judged nothing, and its ✓ would say otherwise."""
    if not stats.requests.ok:
        return []
    return [f"the SLO on {LATENCIES[latency].label} judged no request: no ok answer of this phase had one (answers "
            "that come whole — embeddings, --no-stream — have no first token); judge them with --slo e2e=…"
            for key, latency in SLO_LATENCIES
            if getattr(scenario.slo, key) is not None and getattr(stats.latency_ms, latency).count == 0]


def media_warnings(kinds: Counter[str], answers: int) -> list[str]:
    """Answers that came as something other than a stream of server-sent events."""
    if not kinds:
        return []
    shown = ", ".join(f"{kind} ×{n}" for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
    return [f"{sum(kinds.values())} of {answers} answers did not come as text/event-stream ({shown}): the "
            "endpoint (or a proxy before it) may not be streaming, and their token times may be a buffer's"]


def usage_warnings(fold: PhaseFold) -> list[str]:
    """Answers whose usage counts more tokens than their chunks: it decided their status (a server may put
    several tokens in a chunk), but nothing in the stream shows it."""
    if not fold.usage_over:
        return []
    tokens, chunks = fold.usage_example
    return [f"{fold.usage_over} of {fold.whole_ok} ok answers counted more tokens in their usage than chunks arrived "
            f"(up to {tokens:,} tokens in {chunks:,} chunks): the server puts several tokens in a chunk, or chunks "
            "were lost; their status went by the usage, ITL is per chunk and token rates count the chunks "
            "(client.continuous_usage: true counts each chunk's tokens where the server can)"]


def folded_warnings(fold: PhaseFold, scenario: Scenario) -> list[str]:
    """A phase summarised record by record: its percentiles are a histogram's."""
    if fold.exact:
        return []
    return [f"the run held more records than client.records_in_memory ({scenario.client.records_in_memory:,}): "
            "this phase's percentiles come from histograms, within 0.1% of exact (counts, rates, means, min and max "
            "are exact)"]


def connect_warnings(connections: Connections | None) -> list[str]:
    """Connections that took a second or more to open: SYNs the server dropped, inside those requests'
    TTFT."""
    if connections is None or not connections.slow:
        return []
    return [f"{connections.slow} of {connections.opened} connections opened during the phase took over 1 s "
            f"(max {connections.connect_ms.max:,.0f} ms): the server dropped SYNs (its listen backlog overflowed "
            "under the burst) and those requests' TTFT holds the retry; a larger backlog on the server, or "
            "fewer new connections at once, removes it"]


def build_summary(scenario: Scenario, header: RunHeader, phases: Sequence[PhaseRun],
                  rows: Sequence[Row] = (), scraped: ScrapeInfo | None = None,
                  ceiling_tokens_per_s: float | None = None) -> Summary:
    """The whole summary: header, phases, server series when scraped, and the comparison of the phases."""
    served = (header.endpoint.model if header.endpoint else None) or scenario.endpoint.model
    entries = [phase_summary(scenario, p, rows, ceiling_tokens_per_s, served) for p in phases]
    names = [p.name for p in scenario.phases]
    cut = incomplete(header, names, [p.phase.name for p in phases])
    late = late_phases(header)
    entries = [e.changed(incomplete=cut.get(e.name), warnings=e.warnings + late.get(e.name, []))
               for e in entries]
    return Summary(run=header, phases=entries, server_metrics=scraped, comparison=compare(entries))


def incomplete(header: RunHeader, names: Sequence[str], ran: Sequence[str]) -> dict[str, str]:
    """Why each phase that ran lacks part of its load: the run was stopped in it (the last that ran), a shard
    by hand began it over DISTORTED_MS late (its share sent late: the phase's load was not the one planned),
    or a shard died in it or in a phase before it (its share of every later phase was never sent)."""
    out = {}
    if header.stopped and ran:
        out[ran[-1]] = f"stopped ({header.stopped})"
    for shard in header.shards or []:
        out.update(out_of_step(shard, names))
    for shard in header.shards or []:
        died_in = shard.loss.phase if shard.loss else None
        if died_in is not None and died_in in names:
            who = f"shard {shard.index}/{shard.count}"
            for name in names[names.index(died_in):]:
                out[name] = f"{who} died in it" if name == died_in else f"{who} died in phase {died_in}, before it"
    return out


def out_of_step(shard: ShardInfo, names: Sequence[str]) -> dict[str, str]:
    """A shard by hand's phases begun over DISTORTED_MS from their planned start on the common clock: its own
    lateness (its first phase's `late_ms`, each later one's `phase_late_ms`, read on its own clock) plus its
    clock's measured skew (--clock-ref): a shard 300 ms behind began everything 300 ms late, on time by its
    clock."""
    skew = skew_ms(shard.clock_offset_ms, shard.clock_uncertainty_ms)
    if shard.late_ms is None:  # a worker with a parent: its barriers, on the parent's clock, started its phases
        return {}
    own = {**(dict.fromkeys(names, 0.0) if skew else {}), **({names[0]: shard.late_ms} if names else {}),
           **(shard.phase_late_ms or {})}
    out = {}
    for name, late in ((n, v + skew) for n, v in own.items() if n in names):
        if abs(late) > DISTORTED_MS:
            clock = f" (its clock {skew:+,.0f} ms off the reference's)" if skew else ""
            when = "late" if late > 0 else "early"
            out[name] = (f"shard {shard.index}/{shard.count} began it {abs(late) / 1000:,.1f} s {when}{clock}: its "
                         f"share of the load was sent {when}")
    return out


def late_phases(header: RunHeader) -> dict[str, list[str]]:
    """Shards by hand: phase -> a line for each shard that began it later than planned (it may overlap the
    previous phase on the other shards)."""
    out: dict[str, list[str]] = {}
    shards: list[ShardInfo] = [*header.shards] if header.shards else ([header.shard] if header.shard else [])
    for shard in shards:
        for name, late in (shard.phase_late_ms or {}).items():
            if late > LATE_MS:
                out.setdefault(name, []).append(
                    f"shard {shard.index}/{shard.count} began it {late:,.0f} ms after its planned start: it "
                    "may overlap the previous phase on other shards (a longer --phase-slack keeps the timeline)")
    return out
