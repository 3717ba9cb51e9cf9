"""What a reader must know beside the table, in one line each: the terminal warns with these lines and
report.html shows the same ones, so the two never disagree."""

from __future__ import annotations

from harness.report.table import SERVER_ROWS
from harness.stats.conclusion import thought
from harness.stats.schema import MergedShard, PhaseSummary, RunHeader, ScrapeInfo, ShardInfo, Summary
from harness.stats.server import SERIES
from harness.workload.shards import LATE_MS


def notes(summary: Summary) -> list[str]:
    out = _run_notes(summary.run)
    shards: list[ShardInfo] = [*summary.run.shards] if summary.run.shards else (
        [summary.run.shard] if summary.run.shard else [])
    for shard in shards:
        out += _shard_notes(shard)
    coordinator = summary.run.coordinator
    if coordinator is not None and coordinator.verdict != "ok":
        lag = coordinator.loop_lag_p99_ms
        out.append(f"the parent of the workers was late ({coordinator.verdict}"
                   f"{f', event-loop lag p99 {lag:.1f} ms' if lag is not None else ''}): barriers and phase starts "
                   "across workers may have waited for it; latencies are the workers' own")
    out += _scrape_notes(summary.server_metrics)
    out += _thinking_note(summary)
    for phase in summary.phases:
        if phase.client_limited:
            out.append(client_limited_line(phase))
        if phase.incomplete:
            out.append(f"phase {phase.name} is incomplete: {phase.incomplete}")
        out += [f"phase {phase.name}: {message}" for message in phase.warnings]
        out += [f"phase {phase.name}: {why} ×{phase.requests.failure_reasons.get(why, 0)}: the server said "
                f"\"{_line(said)}\"" for why, said in phase.requests.failure_messages.items()]
    return out


# A verdict's cause (harness.stats.verdict), as a reader of the table needs it.
_PLAIN = {"harness not scheduled": "the machine is busy (the harness waited for a CPU)",
          "harness saturated": "the harness used its whole core", "harness stalled": "the harness stalled"}


def client_limited_line(phase: PhaseSummary) -> str:
    """One line for a client-limited phase: how many figures, by how much at most, and why in a few words; the
    whole reason is in summary.json (client_limited_reason) and report.html."""
    reason = phase.client_limited_reason or ""
    why = next((plain for prefix, plain in _PLAIN.items() if reason.startswith(prefix)), reason.split(":")[0])
    moved = [phase.client_moved[m] for m in phase.client_limited_metrics if m in phase.client_moved]
    if not phase.client_limited_metrics:
        return f"phase {phase.name}: its figures may be off (the * rows): {why} — see notes in report.html"
    most = f" by up to {max(moved):.0%}" if moved else ""
    many = len(phase.client_limited_metrics)
    return (f"phase {phase.name}: {many} figure{'s' * (many > 1)} may be off{most} (the * rows): {why} — see notes "
            "in report.html")


def limited_reasons(summary: Summary) -> list[str]:
    """The whole reason of each client-limited phase, for report.html's notes (the terminal says it short)."""
    return [f"phase {p.name}, why its figures may be off: {p.client_limited_reason}" for p in summary.phases
            if p.client_limited and p.client_limited_reason]


def _thinking_note(summary: Summary) -> list[str]:
    """A TTFT SLO on a reasoning stream judged the first thinking token, not what a chat user waits for."""
    thinking = [p.name for p in summary.phases if thought(p)]
    slo = summary.phases[0].goodput.slo if summary.phases else None
    if not thinking or slo is None or slo.ttft_ms is None or slo.ttft_answer_ms is not None:
        return []
    return [f"the TTFT SLO (≤ {slo.ttft_ms:g} ms) judged the first thinking token: {', '.join(thinking)} streamed "
            "a reasoning model's thinking before the answer; to judge the answer's first token set ttft_answer "
            f"(--slo ttft_answer={slo.ttft_ms:g}ms, or slo.ttft_answer_ms in the scenario)"]


# The table's server rows, and the series each needs (harness.stats.server names them per engine).
def _scrape_notes(scraped: ScrapeInfo | None) -> list[str]:
    """A /metrics that could not be read, or that lacks a series a row of the table shows: why it is empty."""
    if scraped is None:
        return []
    if scraped.unavailable is not None:
        return [f"no server-side series: {scraped.url} gave {scraped.unavailable} (set endpoint.metrics_url or "
                "endpoint.server_metrics, or endpoint.scrape_interval_s: 0 to stop trying)"]
    if not scraped.scrapes:
        return []
    missing = [(series, row) for row, needs, _ in SERVER_ROWS for series in needs if series not in scraped.series]
    return [f"the server's {scraped.url} has no {series} series (none of {', '.join(SERIES[series])}): the table's "
            f"\"{row}\" row shows - (map the engine's own name with endpoint.server_metrics)"
            for series, row in missing]


def _run_notes(run: RunHeader) -> list[str]:
    """How the run ended and whether its records all reached their file."""
    out = []
    if run.endpoint is not None and run.endpoint.insecure:
        out.append("TLS certificates were not checked (--insecure): the endpoint's identity is not proven")
    if run.read_window_us:
        out.append(f"client.read_window_us {run.read_window_us:g}: the client slept {run.read_window_us:g} µs after "
                   "each pass of reads, so each token's stamp (TTFT, ITL, end) may be up to that (plus a pass) late")
    if run.stopped:
        when = f" after {run.stopped_after_s:.1f} s" if run.stopped_after_s is not None else ""
        skipped = f"; not run: {', '.join(run.not_run)}" if run.not_run else ""
        out.append(f"STOPPED{when} by {_signal(run.stopped)}{skipped}; the results are partial: every "
                   "record taken is kept")
    written = run.records_file
    if written is not None and written.failure:
        where = written.rescued_to or "no other folder either: they were lost with the process"
        out.append(f"{written.failure}: the run stopped sending; {written.unwritten} records missed that folder "
                   f"and every record went to {where}")
    if written is not None and written.replaced:
        out.append(f"{written.replaced} records held text no file can hold (a lone surrogate the server sent): "
                   "written with it replaced by '?'")
    return out


def _shard_notes(shard: ShardInfo) -> list[str]:
    """A shard that died, froze or started late (what its parent or merge saw)."""
    out, name = [], f"shard {shard.index}/{shard.count}"
    if isinstance(shard, MergedShard) and (loss := shard.loss):
        never = "" if loss.never_sent is None else f", {loss.never_sent} never sent"
        out.append(f"{name} {shard.stopped or 'died'} in phase {loss.phase}: of {loss.sent} sent, {loss.ended} "
                   f"ended and {loss.in_flight} were in flight (lost){never}; that phase and the ones after it are "
                   "incomplete")
    if isinstance(shard, MergedShard) and (silent := shard.silent_max_s):
        out.append(f"{name} said nothing for {silent:.0f} s (frozen or stuck): its requests in that time were late "
                   "or held, and so were any barriers")
    if shard.late_ms is not None and shard.late_ms > LATE_MS:
        out.append(f"{name} started {shard.late_ms:,.0f} ms after the common start: its share of the load was late "
                   "by as much")
    return out


def _line(text: str, limit: int = 240) -> str:
    """A server's sentence on one line of a terminal: whitespace folded, cut with an ellipsis."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


def _signal(name: str) -> str:
    return {"SIGINT": "Ctrl-C (SIGINT)", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP (the terminal went away)"}.get(name,
                                                                                                           name)
