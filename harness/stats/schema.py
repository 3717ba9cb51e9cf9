"""summary.json as types: the run and each phase, every section a frozen model. Built once (harness.stats.summary),
serialised once (`Summary.to_json`), read back with `Summary.from_json`; docs/summary.md is generated from them
(`python -m harness.stats.schema`). Latencies in ms, rates per second, timestamps monotonic ns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.config.scenario import SLO
from harness.config.simulator import SimulatorConfig

SUMMARY_SCHEMA = "harness.summary/2"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Distribution(_Model):
    """Exact from the records; percentiles within 0.1% past client.records_in_memory (the phase warns); None: none."""

    count: int
    mean: float | None
    std: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p99_9: float | None = Field(alias="p99.9")
    max: float | None


class Requests(_Model):
    total: int = Field(description="requests intended inside the measurement window")
    ok: int
    failed: int
    by_status: dict[str, int]
    failure_reasons: dict[str, int] = Field(description="short, low-cardinality causes and their counts")
    retried: int = Field(0, description="requests sent again because a pooled connection was dead before any answer")


class Window(_Model):
    start_ns: int
    end_ns: int
    duration_s: float


class MeasuredWindow(Window):
    warmup_s: float
    cooldown_s: float


class Load(_Model):
    target_rps: float | None = Field(None, description="the rate the scenario asked for (open loop; a trace: its "
                                     "rows over the replay); null for closed loop, batches and sessions")
    offered_rps: float | None = Field(description="the schedule's own rate: (n − 1) / span of the intended send "
                                      "times (a Poisson sample differs from its target by sampling)")
    sent_rps: float | None = Field(description="(n − 1) / span of the actual send times: the sending window")
    completed_rps: float = Field(description="ok requests per second of the measurement window (it includes "
                                 "draining the last answers)")


class Latencies(_Model):
    ttft: Distribution = Field(description="first token − sent")
    ttft_from_intended: Distribution = Field(description="first token − intended (what a waiting user sees)")
    time_to_first_content: Distribution = Field(description="first answer text − sent (after any reasoning)")
    itl: Distribution = Field(description="gaps between token-bearing chunks, token-normalised")
    chunk_gap: Distribution = Field(description="gaps between token-bearing chunks, per chunk")
    tpot: Distribution = Field(description="(last − first token) / (output tokens − 1)")
    e2e: Distribution = Field(description="last token − sent")
    e2e_from_intended: Distribution


class PhaseLatencies(Latencies):
    schedule_lag: Distribution = Field(description="sent − intended, over every sent request")


class StatusLatencies(Latencies):
    count: int
    output_tokens: int
    duration: Distribution = Field(description="end − sent: last byte, error or cancellation")


class LatencyByStatus(_Model):
    ok: StatusLatencies
    errored: StatusLatencies
    cancelled: StatusLatencies


class Throughput(_Model):
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float


class Goodput(_Model):
    requests_per_s: float = Field(description="ok requests within every SLO, per second")
    fraction: float = Field(description="share of the window's requests within every SLO")
    slo: SLO


class Tokens(_Model):
    output: int
    input: int
    estimated: int = Field(description="ok requests without server usage (output counted from chunks)")
    mismatched: int = Field(description="ok requests whose usage disagrees with the chunks seen")
    prompt_reported: int
    prompt_mismatched: int
    prompt_diff_mean: float | None
    prompt_diff_max_abs: int | None
    cached_reported: int = Field(0, description="ok requests whose server said how many prompt tokens it had cached")
    prompt_cached: int = Field(0, description="prompt tokens served from the server's cache, over those requests")
    cached_share: float | None = Field(None, description="prompt_cached / their prompt tokens")


class WholeRun(_Model):
    window: Window
    requests: int
    ok: int
    throughput: Throughput


class Batches(_Model):
    count: int
    batch_time_ms: Distribution = Field(description="a batch's send to its last completion")
    output_tokens_per_s_mean: float


class ClientHealth(_Model):
    loop_lag_p99_ms: float | None
    cpu_share: float | None = Field(description="of one core, by the event loop's thread")
    cpu_seconds: float | None = Field(description="the whole process's, the request-building thread's included")
    runq_share: float | None = Field(None, description="of the time the harness's main thread was runnable, the "
                                     "share it waited for a CPU (Linux /proc/self/schedstat)")
    load_per_core: float | None = Field(None, description="the machine's 1-minute load average over its cores")
    verdict: Literal["ok", "stalled", "not_scheduled", "saturated"] = Field("ok", description="ok, or why the "
        "harness was late: saturated (its core full), not_scheduled (waiting for a CPU held by another), stalled")
    ceiling_tokens_per_s: float | None = Field(None, description="this machine's `harness calibrate` ceiling")
    ceiling_share: float | None = None


class ServerPhase(_Model):
    """The endpoint's own /metrics over the phase: gauges averaged and maxed, counters as rates."""

    scrapes: int
    running_mean: float | None
    running_max: float | None
    waiting_mean: float | None
    waiting_max: float | None
    kv_cache_usage_mean: float | None
    kv_cache_usage_max: float | None
    generation_tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    preemptions_per_s: float | None
    prefix_cache_hit_share: float | None = Field(None, description="prompt tokens found in the server's prefix "
                                                 "cache / prompt tokens looked up, over the window")


class Stress(_Model):
    """Where the phase's stress landed on the accelerator (docs/output.md, "Where the stress lands")."""

    source: Literal["simulator", "estimate"] = Field(description="the simulator's own account, or an estimate "
                                                     "from measured latency and batch (--hardware)")
    basis: str = Field(description="what the figures rest on, in words")
    memory_bound_share: float | None = Field(None, description="share of step time in memory-bound steps")
    busy_share: float | None = Field(None, description="share of the phase's wall time the engine was stepping")
    mbu: float | None = Field(None, description="bytes read from device memory / (step time × peak bandwidth)")
    mfu: float | None = Field(None, description="FLOPs done / (step time × peak FLOP/s of the weight type)")


class IdleCapped(_Model):
    max_idle_s: float
    gaps: int = Field(description="silences shortened to max_idle_s")
    seconds_removed: float


class TraceUse(_Model):
    source: str
    rows: int
    skipped: dict[str, int]
    offered_rate: float | None = Field(None, description="rows replayed / seconds of replay (the duration when set)")
    idle_capped: IdleCapped | None = None


class Connections(_Model):
    """Connections opened for requests of the phase, once its clock ran (the pool opened ahead is not here)."""

    opened: int = Field(description="requests that found no pooled connection free and opened one")
    connect_ms: Distribution = Field(description="how long opening took (TCP, and TLS for https); it is inside "
                                     "their TTFT and E2E, which run from the intended send")
    slow: int = Field(description="of those, over 1 s: the server's listen queue dropped a SYN and the kernel "
                      "retried (a backlog too small for the burst), or the network lost one")


class PhaseStats(_Model):
    """What the records of one phase say (harness.stats.phase)."""

    requests: Requests
    window: MeasuredWindow
    load: Load
    latency_ms: PhaseLatencies
    latency_by_status_ms: LatencyByStatus
    throughput: Throughput
    goodput: Goodput
    tokens: Tokens
    whole_run: WholeRun
    batches: Batches | None
    client_limited: bool
    client_limited_reason: str | None
    schedule_lag_bound_ms: float
    client: ClientHealth
    connections: Connections | None = Field(None, description="null: every request found a pooled connection "
                                            "(or the aiohttp client, which does not say)")


class ThresholdResult(_Model):
    metric: str = Field(description="e.g. ttft_p99, error_rate, output_tokens_per_s")
    limit: str = Field(description="as the scenario wrote it: '<500ms'")
    observed: float | None = Field(description="the phase's figure in `unit`; null: no data (which fails)")
    unit: str = Field(description="ms for latencies, '' for fractions, /s for rates")
    passed: bool


class _PhaseHead(_Model):
    name: str
    config: dict[str, Any] = Field(description="the phase as the scenario gave it")


class SessionStats(_Model):
    conversations: int
    turns: int = Field(description="requests sent as turns of conversations")
    turns_per_conversation_max: int
    ttft_by_turn_ms: dict[str, Distribution] = Field(description="turn index (0 first) -> TTFT of its ok requests")
    prompt_tokens_by_turn_mean: dict[str, float] = Field(description="turn index -> mean prompt tokens, history "
                                                         "included")


class PhaseSummary(PhaseStats, _PhaseHead):
    """One phase: its name and configuration, what its records say, and what it replayed or scraped."""

    trace: TraceUse | None = Field(None, description="the trace file replayed, when there was one")
    server: ServerPhase | None = Field(None, description="when the endpoint's /metrics was scraped")
    stress: Stress | None = Field(None, description="memory- or compute-bound, MBU and MFU: from the bundled "
                                  "simulator, or estimated for a declared accelerator")
    sessions: SessionStats | None = Field(None, description="multi-turn sessions (workload.sessions)")
    bottleneck: Literal["client", "server"] | None = Field(
        None, description="client: the harness was late (client_limited); server: the server's waiting queue "
        "held requests on average (scraped), so latencies include queueing there; null: neither was seen")
    thresholds: list[ThresholdResult] = Field(default_factory=list, description="the scenario's and the phase's "
                                              "thresholds, each with its observed value; one failed: exit 99")
    warnings: list[str] = Field(default_factory=list, description="what may make the phase's figures "
                                "misleading (a prompt cache carried over, prompts not of the asked length)")
    incomplete: str | None = Field(None, description="why part of the phase's load was never sent or never "
                                   "answered (the run was stopped in it, a shard died in it or before); null: whole")


class Anchor(_Model):
    monotonic_ns: int
    wall_ns: int


class EndpointInfo(_Model):
    base_url: str
    model: str
    api: str
    bundled_simulator: bool
    accelerator: str | None = Field(None, description="what the endpoint runs on, as the scenario declared it")


class ServerTokenizer(_Model):
    kind: Literal["server"]
    words: int = Field(description="words of the harness's vocabulary that are one token at the server")
    template_overhead: int = Field(description="tokens the server adds around a one-turn prompt, taken off each")


class ShardInfo(_Model):
    index: int
    count: int
    start_at: float | None = None  # the common start, Unix seconds
    late_ms: float | None = Field(None, description="how long after the common start the shard began (0: on time)")
    clock_offset_ms: float | None = Field(None, description="the coordinator's wall clock − this shard's, measured "
                                          "NTP-style at its start (--workers/--ray; null by hand)")
    clock_uncertainty_ms: float | None = Field(None, description="± of that: half the shortest round trip")
    phase_slack_s: float | None = Field(None, description="by hand (--shard without a parent): the pause planned "
                                        "after each phase's schedule before the next phase starts on every shard")
    phase_late_ms: dict[str, float] | None = Field(None, description="by hand: phase -> how long after its planned "
                                                   "start it began on this shard (late: the phase before ran over)")


class ShardLoss(_Model):
    """What a worker that died had done, counted by its parent from what it streamed back."""

    phase: str | None = Field(description="the phase it died in: that phase and the ones after are incomplete")
    sent: int = Field(description="requests it had sent")
    ended: int = Field(description="of those, ended with a record (ok or not), kept")
    in_flight: int = Field(description="sent and not ended when it died: lost, their answers never seen")
    never_sent: int | None = Field(description="its share it never sent (null: a phase bound by time)")


class MergedShard(ShardInfo):
    run_dir: str
    records: int
    complete: bool | None
    stopped: str | None
    loss: ShardLoss | None = Field(None, description="a worker of --workers/--ray that died: what was lost")
    silent_max_s: float | None = Field(None, description="a worker that said nothing for over 5 s (frozen, "
                                       "stuck): its longest silence")
    records_at: str | None = Field(None, description="where the worker wrote its own records (host:path for a Ray "
                                   "actor: they stay on that node if the driver dies)")


class RecordsFile(_Model):
    """Whether every record reached requests.jsonl."""

    unwritten: int = Field(description="records the run's folder did not take (a full disk, a deleted folder): "
                           "counted in the phases all the same, and written to `rescued_to`")
    replaced: int = Field(description="records with text no file can hold (a lone surrogate a server sent), "
                          "written with it replaced")
    failure: str | None = Field(description="the first failed write, in one line; the run stopped sending there")
    rescued_to: str | None = Field(description="the folder that took every record and the reports instead")


class RunHeader(_Model):
    """Who ran what, when, against which endpoint; how the run ended."""

    run_id: str
    scenario: str
    harness_version: str
    seed: int
    mode: Literal["run", "predict"] = "run"
    started_at: str | None = None
    anchor: Anchor | None = Field(None, description="monotonic_ns + (wall_ns − monotonic_ns) = wall time")
    endpoint: EndpointInfo | None = None
    simulator: SimulatorConfig | None = Field(None, description="the bundled or predicted simulator")
    stopped: str | None = Field(None, description="the signal that stopped the run")
    stopped_after_s: float | None = Field(None, description="seconds from the start to that signal")
    not_run: list[str] = Field(default_factory=list, description="phases the run never started (it was stopped, "
                               "or a phase before them did not end)")
    complete: bool = True
    tokenizer: ServerTokenizer | None = Field(None, description="with --tokenizer server: what the endpoint said")
    shard: ShardInfo | None = Field(None, description="with --shard i/N: this process's share of the run")
    shards: list[MergedShard] | None = Field(None, description="after `harness merge`: the shards it joined")
    records_file: RecordsFile | None = Field(None, description="null: a run written before this was kept")
    coordinator: ClientHealth | None = Field(None, description="--workers/--ray: the parent's own self-check (a "
                                             "late parent delays barriers and the live view, not latencies)")


class ScrapeInfo(_Model):
    url: str
    interval_s: float
    scrapes: int
    failures: dict[str, int]
    unavailable: str | None
    series: list[str]


class PhaseComparison(_Model):
    phase: str
    batch_size: int
    versus: str
    throughput_ratio: float | None
    ttft_p50_ratio: float | None
    ttft_p99_ratio: float | None
    itl_p50_ratio: float | None
    goodput_fraction: float
    interactive_goodput_fraction: float
    at_capacity: bool = Field(False, description="versus is the interactive sweep's knee: its fastest point "
                              "with ≥ 95% goodput; else an arbitrary offered rate")
    versus_offered_rps: float | None = None
    waiting_max: float | None = Field(None, description="most requests the server held waiting during the batch "
                                      "phase (scraped)")
    stress: Stress | None = Field(None, description="where the batch phase's stress landed")
    interactive_stress: Stress | None = Field(None, description="where the interactive phase's stress landed")


class Comparison(_Model):
    phases: list[PhaseComparison]
    conclusion: list[str]


class Summary(_Model):
    """The whole of summary.json."""

    schema_: str = Field(SUMMARY_SCHEMA, alias="schema")
    run: RunHeader
    phases: list[PhaseSummary]
    server_metrics: ScrapeInfo | None = None
    comparison: Comparison

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        return cls.model_validate(data)
