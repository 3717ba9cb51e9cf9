"""The harness's own Prometheus metrics, live while a run lasts (`--metrics-port`).

It observes the record stream the runner already has (each finished record, once) and takes every figure
from `harness.stats.metrics`, so a dashboard and summary.json never disagree on a definition. Its registry is
its own; the labels are `scenario` and `phase` (and a status and a bounded failure cause on the request
counter): never a request id, which rides along as an OpenMetrics exemplar on the latency histograms instead,
so a slow bucket in Grafana leads to its record in requests.jsonl.

Histograms keep their bucket counts in numpy under one lock: a request's ITL is ~100 samples, which
prometheus-client's per-value `observe` would cost ~100 lock-and-scan rounds for (bench/exporter.py).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar

from harness.clock import NS_PER_S
from harness.config.load import describe
from harness.config.metric_registry import LATENCIES, Latency
from harness.records import RequestRecord
from harness.run.observe import PhaseStart
from harness.stats.metrics import PER_RECORD, cause, itl_array_ns, schedule_lag_ns
from harness.stats.phase import span_rate
from harness.workload.plan import OpenLoopPlan, SessionPlan

# LLM latencies span 0.5 ms (an ITL on a fast engine) to 10 min (a long answer under load). From 1 ms to 60 s
# the bounds grow by 2^(1/16) (4.4%) a bucket, so histogram_quantile's interpolation inside one bucket is off
# by at most ~4.4% there (half that for spread data; docs/observability.md has the measured error); coarser
# outside. 260 buckets: scraping them costs the harness ~1 ms of CPU per histogram and phase
# (bench/exporter.py).
LATENCY_BUCKETS_S = (0.00025, 0.0005, *(round(0.001 * 2 ** (k / 16), 9) for k in range(254)), 60.0, 120.0,
                     300.0, 600.0)
_LES = (*(f"{b:g}" for b in LATENCY_BUCKETS_S), "+Inf")  # the `le` labels, formatted once
MAX_REASONS = 20  # distinct failure causes a run may add as label values; the rest count as "other"
_BOUNDS = np.asarray(LATENCY_BUCKETS_S)
# Observed once per ok record (ITL: per gap); the schedule lag of every record, sent or failed.
_PER_OK_RECORD = [latency for latency, info in LATENCIES.items() if info.live and latency not in (
    Latency.ITL, Latency.SCHEDULE_LAG)]
_HISTOGRAMS = {latency: info.doc for latency, info in LATENCIES.items() if info.live}


def _status(rec: RequestRecord) -> str:
    return rec.status if rec.status in ("ok", "cancelled") else "errored"


class _Histograms(Collector):
    """Bucket counts, sums and the latest exemplar per bucket, for each histogram and (scenario[, shard],
    phase)."""

    def __init__(self, names: list[str]) -> None:
        self._names = names
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self._sums: dict[tuple[str, tuple[str, ...]], float] = {}
        self._exemplars: dict[tuple[str, tuple[str, ...]], list[Exemplar | None]] = {}

    def _slot(self, key: tuple[str, tuple[str, ...]]) -> np.ndarray:
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = np.zeros(len(LATENCY_BUCKETS_S) + 1, dtype=np.int64)
            self._sums[key] = 0.0
            self._exemplars[key] = [None] * (len(LATENCY_BUCKETS_S) + 1)
        return counts

    def observe(self, name: str, labels: tuple[str, ...], seconds: float, request_id: str) -> None:
        key = (name, labels)
        at = bisect.bisect_left(LATENCY_BUCKETS_S, seconds)
        exemplar = Exemplar({"request_id": request_id}, seconds, time.time())
        with self._lock:
            self._slot(key)[at] += 1
            self._sums[key] += seconds
            self._exemplars[key][at] = exemplar

    def observe_many(self, name: str, labels: tuple[str, ...], seconds: np.ndarray, request_id: str) -> None:
        """A request's many samples (its ITL) at once; its exemplar goes to the bucket of its slowest."""
        if not len(seconds):
            return
        key = (name, labels)
        at = np.searchsorted(_BOUNDS, seconds, side="left")
        slowest = float(seconds.max())
        exemplar = Exemplar({"request_id": request_id}, slowest, time.time())
        with self._lock:
            counts = self._slot(key)
            counts += np.bincount(at, minlength=len(counts))
            self._sums[key] += float(seconds.sum())
            self._exemplars[key][bisect.bisect_left(LATENCY_BUCKETS_S, slowest)] = exemplar

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snapshot = [(k, c.cumsum().tolist(), self._sums[k], list(self._exemplars[k]))
                        for k, c in self._counts.items()]
        for name, doc in _HISTOGRAMS.items():
            family = HistogramMetricFamily(f"harness_{name}_seconds", doc, labels=self._names)
            for (metric, labels), cumulative, total, exemplars in snapshot:
                if metric != name:
                    continue
                family.add_metric(list(labels), [(le, n, ex) if ex else (le, n) for le, n, ex in
                                                 zip(_LES, cumulative, exemplars, strict=True)], total)
            yield family


class LiveMetrics:
    """Fed every finished record of the run and told when a phase begins; served on a port while it runs."""

    def __init__(self, scenario: str, shard: str = "", labels: Mapping[str, str] | None = None) -> None:
        # A shard by hand labels every series with its "i/N" (a dashboard sums over it); a whole run has no
        # such label.
        self._prefix = (scenario, shard) if shard else (scenario,)
        base = ["scenario", "shard", "phase"] if shard else ["scenario", "phase"]
        self.registry = CollectorRegistry()
        self._hist = _Histograms(base)
        self.registry.register(self._hist)
        self._requests = Counter("harness_requests", "finished requests by status (ok, errored, cancelled) and "
                                 "cause", [*base, "status", "reason"], registry=self.registry)
        self._output = Counter("harness_output_tokens", "output tokens received, ok requests", base,
                               registry=self.registry)
        self._input = Counter("harness_input_tokens", "prompt tokens of ok requests (the server's count where it "
                              "gave one)", base, registry=self.registry)
        self._in_flight = Gauge("harness_requests_in_flight", "requests sent and not yet ended", base,
                                registry=self.registry)
        self._offered = Gauge("harness_offered_requests_per_second", "the phase's schedule: (n − 1) / span of its "
                              "intended send times (open loop only)", base, registry=self.registry)
        if labels:  # the run's tags (--label), joined onto any series by `scenario` in a query
            tags = Gauge("harness_run_labels", "1, labelled with the run's tags (--label k=v)",
                         ["scenario", *labels], registry=self.registry)
            tags.labels(scenario, *labels.values()).set(1)
        self._info = Gauge("harness_phase_info", "1 for the phase running now, 0 for phases done", [*base, "load"],
                           registry=self.registry)
        self._limited = Gauge("harness_client_limited", "1: the harness could not keep up in this phase (live: a "
                              "second of its self-check; at the end: the phase's verdict), so its latencies are "
                              "inflated and untrusted; 0: it kept up", base, registry=self.registry)
        self._reasons: set[str] = set()
        self._phase: tuple[str, ...] = (*self._prefix, "")
        self._load = ""
        self._done = 0
        self._server: Any = None
        self._output_child = self._output.labels(*self._phase)
        self._input_child = self._input.labels(*self._phase)
        self._counters: dict[tuple[str, str], Any] = {}

    def begin_phase(self, start: PhaseStart) -> None:
        offsets = start.plan.offsets_ns if isinstance(start.plan, OpenLoopPlan | SessionPlan) else None
        self.open_phase(start.phase.name, describe(start.phase.load),
                        None if offsets is None else span_rate(offsets.tolist()), start.launched)

    def flush(self) -> None:
        pass

    def open_phase(self, phase: str, load: str, offered_rps: float | None, launched: Callable[[], int]) -> None:
        """A phase begins: its load in words, its schedule's rate (open loop), its count of requests sent."""
        self.end_phase()
        self._phase, self._load, self._done = (*self._prefix, phase), load, 0
        self._info.labels(*self._phase, load).set(1)
        self._limited.labels(*self._phase).set(0)
        if offered_rps is not None:
            self._offered.labels(*self._phase).set(offered_rps)
        # Read at scrape time: sent so far (the dispatcher's count) − ended so far; nothing on the hot path.
        self._in_flight.labels(*self._phase).set_function(lambda: max(launched() - self._done, 0))
        # The phase's children, found once: prometheus-client's labels() costs microseconds a call.
        self._output_child = self._output.labels(*self._phase)
        self._input_child = self._input.labels(*self._phase)
        self._counters = {}

    def client_late(self) -> None:
        """The self-check found a second in which the harness could not keep up."""
        if self._phase[-1]:
            self._limited.labels(*self._phase).set(1)

    def verdicts(self, phases: dict[str, bool]) -> None:
        """Each phase's final client-limited verdict, from its summary."""
        for phase, limited in phases.items():
            self._limited.labels(*self._prefix, phase).set(int(limited))

    def end_phase(self) -> None:
        if self._phase[-1]:
            self._info.labels(*self._phase, self._load).set(0)
            self._in_flight.labels(*self._phase).set_function(lambda: 0)

    def record(self, rec: RequestRecord) -> None:
        self._done += 1
        labels = self._phase
        status = _status(rec)
        reason = "" if status == "ok" else cause(rec)
        counter = self._counters.get((status, reason))
        if counter is None:
            if reason and len(self._reasons) >= MAX_REASONS and reason not in self._reasons:
                reason = "other"
            self._reasons.add(reason)
            counter = self._counters[(status, reason)] = self._requests.labels(*labels, status, reason)
        counter.inc()
        lag = schedule_lag_ns(rec)
        if lag is not None:
            self._hist.observe(Latency.SCHEDULE_LAG, labels, lag / NS_PER_S, rec.request_id)
        if status != "ok":
            return
        self._output_child.inc(rec.delivered_tokens)
        self._input_child.inc(rec.prompt_tokens if rec.prompt_tokens is not None else rec.prompt_tokens_requested)
        for latency in _PER_OK_RECORD:
            if (value := PER_RECORD[latency](rec)) is not None:
                self._hist.observe(latency, labels, value / NS_PER_S, rec.request_id)
        self._hist.observe_many(Latency.ITL, labels, itl_array_ns(rec) / NS_PER_S, rec.request_id)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Serve /metrics from a thread of prometheus-client's (it negotiates OpenMetrics for exemplars)."""
        self._server, _ = start_http_server(port, addr, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
