"""The simulator's /metrics, under vLLM's metric names and buckets so dashboards work unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from harness.sim.engine import SimRequest, StepAccount
from harness.sim.realtime import Snapshot, StepGate

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
LATENESS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class BulkHistogram(Collector):
    """A histogram fed a whole array at a time (one request's inter-token gaps), counted with numpy.

    prometheus-client's Histogram takes one observation per call, which at tens of thousands of
    tokens a second costs the simulator a fifth of its core.
    """

    def __init__(self, name: str, documentation: str, labels: dict[str, str], buckets: tuple[float, ...]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.bounds = np.asarray(buckets, dtype=np.float64)
        self.counts = np.zeros(len(buckets) + 1, dtype=np.int64)  # the last bin is +Inf
        self.total = 0.0

    def observe_many(self, values: np.ndarray) -> None:
        self.counts += np.bincount(np.searchsorted(self.bounds, values, side="left"), minlength=len(self.counts))
        self.total += float(values.sum())

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        cumulative = np.cumsum(self.counts)
        edges = [*(repr(float(b)) for b in self.bounds), "+Inf"]
        buckets = list(zip(edges, cumulative.astype(float).tolist(), strict=True))
        family.add_metric(list(self.labels.values()), buckets, self.total)
        yield family


def _one_two_five(most: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to `most`: vLLM's buckets for token counts."""
    out, scale = [], 1
    while scale <= most:
        out += [m * scale for m in (1, 2, 5) if m * scale <= most]
        scale *= 10
    return tuple(float(v) for v in out)


_GAPS_HELD = 8192  # inter-token gaps waiting for the ITL histogram, at most
_FAMILIES_AT_ONCE = 4  # a scrape's text, rendered a few families at a time between steps
_CHUNK_NS = 1_000_000  # what a few families cost at most, with room


class _Families(Collector):
    """Families already collected, for `generate_latest` to render."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)

ENGINE = "0"  # vLLM labels each engine core's metrics with its index; the simulator is one engine


class SimMetrics:
    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        r = self.registry
        self._running = Gauge("vllm:num_requests_running", "Requests in the running batch", labels, registry=r)
        self._waiting = Gauge("vllm:num_requests_waiting", "Requests waiting", labels, registry=r)
        self._kv = Gauge("vllm:kv_cache_usage_perc", "KV cache usage (1 = full)", labels, registry=r)
        self._preempt = Counter("vllm:num_preemptions", "Preemptions", labels, registry=r)
        self._prompt = Counter("vllm:prompt_tokens", "Prompt tokens processed", labels, registry=r)
        self._gen = Counter("vllm:generation_tokens", "Generated tokens", labels, registry=r)
        self._ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", labels, buckets=TTFT_BUCKETS,
                               registry=r)
        self._itl = BulkHistogram("vllm:inter_token_latency_seconds", "ITL",
                                  {"model_name": model_name, "engine": ENGINE}, ITL_BUCKETS)
        r.register(self._itl)
        self._e2e = Histogram("vllm:e2e_request_latency_seconds", "E2E", labels, buckets=REQUEST_BUCKETS,
                              registry=r)
        self._queue = Histogram("vllm:request_queue_time_seconds", "Queue time", labels,
                                buckets=REQUEST_BUCKETS, registry=r)
        self._finished_series(labels)
        self._prefix_q = Counter("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache",
                                 labels, registry=r)
        self._prefix_h = Counter("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache", labels,
                                 registry=r)
        self._sim_series()
        self._stress_seen = dict.fromkeys(self._stress_counters, 0.0)
        self._label = (model_name, ENGINE)
        self._gaps: list[int] = []  # inter-token gaps (ns) not yet in the ITL histogram
        self._seen = {"preemptions": 0, "prefix_query_tokens": 0, "prefix_hit_tokens": 0, "generation_tokens": 0,
                      "prompt_tokens": 0}

    def _sim_series(self) -> None:
        """Not vLLM metrics: how late the simulator released each step against its own deadline, and where the
        simulated device's time went (docs/simulator.md, "Where the stress lands")."""
        r = self.registry
        self._lateness = Histogram("sim:step_lateness_seconds", "Step release time minus its deadline",
                                   buckets=LATENESS_BUCKETS, registry=r)
        self._stress_counters = {
            "memory_bound_s": Counter("sim:memory_bound_seconds", "Step time whose memory reads outlast its "
                                      "arithmetic", registry=r),
            "compute_bound_s": Counter("sim:compute_bound_seconds", "Step time whose arithmetic outlasts its "
                                       "memory reads", registry=r),
            "hbm_bytes": Counter("sim:hbm_read_bytes", "Bytes read from device memory (weights, KV)", registry=r),
            "flops": Counter("sim:flops", "Floating-point operations done", registry=r)}
        self._mbu = Gauge("sim:step_mbu", "Last step: bytes read / (its time × peak bandwidth)", registry=r)
        self._mfu = Gauge("sim:step_mfu", "Last step: FLOPs / (its time × peak FLOP/s)", registry=r)
        self._peak_bw = Gauge("sim:peak_hbm_bytes_per_second", "The device's peak memory bandwidth, all ranks",
                              registry=r)
        self._peak_flops = Gauge("sim:peak_flops_per_second", "The device's peak FLOP/s for its weight type, "
                                 "all ranks", registry=r)

    def _finished_series(self, labels: list[str]) -> None:
        """vLLM's series of finished requests: by finish reason, their token counts and where their time
        went."""
        r = self.registry
        self._success = Counter("vllm:request_success", "Requests finished, by finish reason",
                                [*labels, "finished_reason"], registry=r)
        tokens = _one_two_five(1 << 20)
        self._req_prompt = Histogram("vllm:request_prompt_tokens", "Prompt tokens of finished requests", labels,
                                     buckets=tokens, registry=r)
        self._req_gen = Histogram("vllm:request_generation_tokens", "Generated tokens of finished requests", labels,
                                  buckets=tokens, registry=r)
        self._phases = {name: Histogram(f"vllm:request_{name}_time_seconds", doc, labels, buckets=REQUEST_BUCKETS,
                                        registry=r)
                        for name, doc in (("prefill", "First scheduled to first token"),
                                          ("decode", "First token to last"),
                                          ("inference", "First scheduled to last token"))}

    def observe_tokens(self, req: SimRequest, seen: int) -> None:
        """Tokens `seen`.. of `req` were just released: TTFT at its first, the gaps before each new one —
        every iteration, as vLLM 0.33 does (so a request still streaming, or aborted later, is in them
        already)."""
        times = req.token_ns
        n = len(times)
        # The gaps wait in a list and are counted with numpy at the next scrape: this runs for every request
        # in every step, mostly for one new token.
        if seen and n == seen + 1:
            self._gaps.append(times[-1] - times[-2])
            if len(self._gaps) >= _GAPS_HELD:  # a simulator nobody scrapes must not hold every gap it made
                self._count_gaps()
            return
        if seen == 0 and n:
            self._ttft.labels(*self._label).observe((times[0] - req.arrival_ns) / 1e9)
        for i in range(max(seen, 1), n):
            self._gaps.append(times[i] - times[i - 1])

    def observe_ended(self, req: SimRequest, end_ns: int) -> None:
        """A request finished: its end-to-end and queue times. An aborted one is not observed (vLLM 0.33
        records them from a finished request's stats only)."""
        if not req.finished:
            return
        lab, times = self._label, req.token_ns
        self._e2e.labels(*lab).observe(max(0, end_ns - req.arrival_ns) / 1e9)
        self._success.labels(*lab, req.finish_reason).inc()
        self._req_prompt.labels(*lab).observe(req.prompt_tokens)
        self._req_gen.labels(*lab).observe(len(times))
        if req.scheduled_ns is not None:
            self._queue.labels(*lab).observe(max(0, req.scheduled_ns - req.arrival_ns) / 1e9)
            if times:
                for name, (a, b) in (("prefill", (req.scheduled_ns, times[0])), ("decode", (times[0], times[-1])),
                                     ("inference", (req.scheduled_ns, times[-1]))):
                    self._phases[name].labels(*lab).observe(max(0, b - a) / 1e9)

    def observe_step_lateness(self, late_ns: int) -> None:
        self._lateness.observe(max(late_ns, 0) / 1e9)

    def _count_gaps(self) -> None:
        if self._gaps:
            self._itl.observe_many(np.asarray(self._gaps, dtype=np.float64) / 1e9)
            self._gaps = []

    def render(self, snap: Snapshot) -> bytes:
        self._update(snap)
        return generate_latest(self.registry)

    async def render_between_steps(self, snap: Snapshot, gate: StepGate) -> bytes:
        """As `render`, a few families at a time, each where it delays no step: the whole text is ~2.5 ms of
        a 2-core machine's time at a busy simulator's 28 KB (longer with a collection inside), more than a
        short step leaves. The figures are those of one instant; the text is put together around steps."""
        self._update(snap)
        parts: list[bytes] = []
        chunk: list[Metric] = []
        for family in self.registry.collect():
            chunk.append(family)
            if len(chunk) == _FAMILIES_AT_ONCE:
                await gate.clear(_CHUNK_NS)
                parts.append(generate_latest(_Families(chunk)))
                chunk = []
        if chunk:
            parts.append(generate_latest(_Families(chunk)))
        return b"".join(parts)

    def _update(self, snap: Snapshot) -> None:
        self._count_gaps()
        lab = self._label
        self._running.labels(*lab).set(snap.running)
        self._waiting.labels(*lab).set(snap.waiting)
        self._kv.labels(*lab).set(snap.kv_usage)
        # The engine keeps running totals; counters advance by what is new since the last scrape.
        for counter, key in ((self._preempt, "preemptions"), (self._prefix_q, "prefix_query_tokens"),
                             (self._prefix_h, "prefix_hit_tokens"), (self._gen, "generation_tokens"),
                             (self._prompt, "prompt_tokens")):
            value = getattr(snap, key)
            counter.labels(*lab).inc(value - self._seen[key])
            self._seen[key] = value
        if snap.stress is not None:
            self._render_stress(snap.stress, snap.peaks)

    def _render_stress(self, stress: StepAccount, peaks: tuple[float, float] | None) -> None:
        for key, stress_counter in self._stress_counters.items():
            value = getattr(stress, key)
            stress_counter.inc(value - self._stress_seen[key])
            self._stress_seen[key] = value
        if peaks is not None:
            self._mbu.set(stress.last_mbu)
            self._mfu.set(stress.last_mfu)
            self._peak_bw.set(peaks[0])
            self._peak_flops.set(peaks[1])
