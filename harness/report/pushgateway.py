"""A run's summary pushed to a Prometheus Pushgateway when it ends, for nightly jobs that leave no process
to scrape: gauges per phase, grouped by job and scenario (and any labels a CI system adds, e.g. branch) — not
by host, so ephemeral CI runners do not leave a new group behind every night.

A `--repeat N` run pushes once, at the end, every figure for each run (label `repeat="1"` … `"N"`) and their
mean (`repeat="mean"`, what a dashboard or alert should read); a single run pushes `repeat="1"` and `"mean"`
alike. A push replaces the group's previous metrics (HTTP PUT), so the gateway holds the latest night of each
scenario and branch; `harness_run_info{run_id}` says which runs those were, `harness_run_timestamp_seconds`
when.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from urllib.request import ProxyHandler, Request, build_opener

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from harness.config.metric_registry import LATENCIES, PUSHED_STATISTICS, REGISTRY, of
from harness.config.scenario import Pushgateway
from harness.stats.schema import PhaseSummary, ShardInfo, Summary
from harness.stats.thresholds import observed
from harness.voice import Voice

_TIMEOUT_S = 10.0
Figures = dict[tuple[str, str, tuple[str, ...]], dict[tuple[str, ...], float]]  # (name, doc, labels) → values


def _phase_figures(phase: PhaseSummary, out: Figures) -> None:
    name = phase.name
    for latency in (latency for latency, info in LATENCIES.items() if info.pushed):
        for entry in (of(latency, stat) for stat in PUSHED_STATISTICS):
            value = observed(entry.name, phase)
            if value is not None and entry.quantile is not None:
                key = (f"harness_summary_{latency}_seconds",
                       f"{LATENCIES[latency].doc}, of ok requests, by phase and quantile", ("phase", "quantile"))
                out.setdefault(key, {})[(name, f"{entry.quantile / 100:g}")] = value / 1000
    # Base units: seconds, shares, per second
    for entry in (e for e in REGISTRY.values() if e.export is not None):
        value = observed(entry.name, phase) or 0.0
        out.setdefault((f"harness_summary_{entry.export}", entry.doc, ("phase",)), {})[(name,)] = (
            value / 1000 if entry.kind == "latency" else value)
    out.setdefault(("harness_summary_client_limited", "1: the harness could not keep up in this phase (its "
                    "latencies are untrusted)", ("phase",)), {})[(name,)] = float(phase.client_limited)
    for status, n in phase.requests.by_status.items():
        out.setdefault(("harness_summary_requests", "requests of the phase by status", ("phase", "status")),
                       {})[(name, status)] = n
    for t in phase.thresholds:
        out.setdefault(("harness_threshold_passed", "1: the threshold held; 0: it broke (or had no data)",
                        ("phase", "metric", "limit")), {})[(name, t.metric, t.limit)] = float(t.passed)


def figures(summary: Summary) -> Figures:
    """Every figure pushed for one run, keyed by metric and labels."""
    out: Figures = {}
    for phase in summary.phases:
        _phase_figures(phase, out)
    run = summary.run
    out[("harness_run_complete", "1: every phase ran to its end; 0: stopped, or a phase never ran", ())] = {
        (): 1.0 if run.complete else 0.0}
    started = run.started_at
    when = dt.datetime.fromisoformat(started).timestamp() if started else dt.datetime.now(dt.UTC).timestamp()
    out[("harness_run_timestamp_seconds", "when the run started (Unix time)", ())] = {(): when}
    if run.labels:  # its tags, as labels of one series (repeats of one command share them)
        out[("harness_run_labels", "1, labelled with the run's tags (--label k=v)", tuple(run.labels))] = {
            tuple(run.labels.values()): 1.0}
    return out


def summary_registry(summaries: Sequence[Summary]) -> CollectorRegistry:
    """Each run's figures (label repeat = its number) and their mean over the runs that have them
    (repeat="mean"); base units."""
    registry = CollectorRegistry()
    each = [figures(s) for s in summaries]
    for key in dict.fromkeys(k for f in each for k in f):
        name, doc, labels = key
        gauge = Gauge(name, doc, [*labels, "repeat"], registry=registry)
        for values in dict.fromkeys(v for f in each for v in f.get(key, {})):
            got = [(k, f[key][values]) for k, f in enumerate(each, 1) if values in f.get(key, {})]
            for k, value in got:
                gauge.labels(*values, str(k)).set(value)
            gauge.labels(*values, "mean").set(sum(v for _, v in got) / len(got))
    info = Gauge("harness_run_info", "1 for each run of this push, by its run id", ["run_id", "repeat"],
                 registry=registry)
    for k, summary in enumerate(summaries, 1):
        info.labels(summary.run.run_id, str(k)).set(1)
    return registry


def grouping(cfg: Pushgateway, scenario: str, shard: ShardInfo | None = None) -> dict[str, str]:
    """job (given apart) + scenario + the configured labels: no host name, which would make every ephemeral
    runner a new group (add `instance` as a label where a per-host group is wanted); a shard by hand's "i/N"
    as `shard`, so the shards of one run push side by side rather than over each other."""
    mine = {"shard": f"{shard.index}/{shard.count}"} if shard is not None and shard.count > 1 else {}
    return {"scenario": scenario, **mine, **cfg.labels}


def direct(url: str, method: str, timeout: float | None, headers: Sequence[tuple[str, str]], data: bytes
           ) -> Callable[[], None]:
    """prometheus-client's push, without the proxy variables urllib would honour: every request the harness
    makes goes direct, as its HTTP clients do (docs/endpoints.md)."""
    def handle() -> None:
        request = Request(url, data=data, method=method)
        for name, value in headers:
            request.add_header(name, value)
        with build_opener(ProxyHandler({})).open(request, timeout=timeout) as resp:
            if resp.status >= 400:
                raise OSError(f"error talking to pushgateway: {resp.status} {resp.reason}")
    return handle


def push_summary(cfg: Pushgateway, summaries: Sequence[Summary], voice: Voice) -> bool:
    """Push; a gateway that is down or refuses is a warning (the run and its reports stand), never an
    error."""
    if not summaries:
        return False
    group = grouping(cfg, summaries[0].run.scenario, summaries[0].run.shard)
    try:
        push_to_gateway(cfg.url, job=cfg.job, registry=summary_registry(summaries), grouping_key=group,
                        timeout=_TIMEOUT_S, handler=direct)
    except Exception as exc:  # urllib's errors, a bad URL, a refused connection: all only worth a warning
        voice.warn(f"pushgateway {cfg.url}: not pushed ({type(exc).__name__}: {exc})")
        return False
    return True
