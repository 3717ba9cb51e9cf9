"""What a reader must know beside the table, in one line each: the terminal warns with these lines and
report.html shows the same ones, so the two never disagree."""

from __future__ import annotations

from typing import Any

from harness.workload.shards import LATE_MS


def notes(summary: dict[str, Any]) -> list[str]:
    out = []
    run = summary.get("run", {})
    if run.get("stopped"):
        after = run.get("stopped_after_s")
        when = f" after {after:.1f} s" if after is not None else ""
        not_run = run.get("not_run") or []
        skipped = f"; not run: {', '.join(not_run)}" if not_run else ""
        out.append(f"STOPPED{when} by {_signal(run['stopped'])}{skipped}; the results are partial: every "
                   "record taken is kept")
    written = run.get("records_file") or {}
    if written.get("failure"):
        where = written.get("rescued_to") or "no other folder either: they were lost with the process"
        out.append(f"{written['failure']}: the run stopped sending; {written['unwritten']} records missed that folder "
                   f"and every record went to {where}")
    if written.get("replaced"):
        out.append(f"{written['replaced']} records held text no file can hold (a lone surrogate the server sent): "
                   "written with it replaced by '?'")
    for shard in run.get("shards") or [run.get("shard") or {}]:
        if loss := shard.get("loss"):
            never = "" if loss["never_sent"] is None else f", {loss['never_sent']} never sent"
            out.append(f"shard {shard['index']}/{shard['count']} {shard.get('stopped') or 'died'} in phase "
                       f"{loss['phase']}: of {loss['sent']} sent, {loss['ended']} ended and {loss['in_flight']} were "
                       f"in flight (lost){never}; that phase and the ones after it are incomplete")
        if silent := shard.get("silent_max_s"):
            out.append(f"shard {shard['index']}/{shard['count']} said nothing for {silent:.0f} s (frozen or stuck): "
                       "its requests in that time were late or held, and so were any barriers")
        late = shard.get("late_ms")
        if late is not None and late > LATE_MS:
            out.append(f"shard {shard['index']}/{shard['count']} started {late:,.0f} ms after the common start: "
                       "its share of the load was late by as much")
    coordinator = run.get("coordinator") or {}
    if coordinator.get("verdict", "ok") != "ok":
        lag = coordinator.get("loop_lag_p99_ms")
        out.append(f"the parent of the workers was late ({coordinator['verdict']}"
                   f"{f', event-loop lag p99 {lag:.1f} ms' if lag is not None else ''}): barriers and phase starts "
                   "across workers may have waited for it; latencies are the workers' own")
    scraped = summary.get("server_metrics")
    if scraped is not None and scraped.get("unavailable") is not None:
        out.append(f"no server-side series: {scraped['url']} gave {scraped['unavailable']} (set "
                   "endpoint.metrics_url or endpoint.server_metrics, or endpoint.scrape_interval_s: 0 to stop trying)")
    for phase in summary.get("phases", []):
        if phase.get("client_limited"):
            out.append(f"phase {phase['name']} was client-limited: {phase.get('client_limited_reason')}")
        if phase.get("incomplete"):
            out.append(f"phase {phase['name']} is incomplete: {phase['incomplete']}")
        out += [f"phase {phase['name']}: {message}" for message in phase.get("warnings", [])]
    return out


def _signal(name: str) -> str:
    return {"SIGINT": "Ctrl-C (SIGINT)", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP (the terminal went away)"}.get(name,
                                                                                                           name)

