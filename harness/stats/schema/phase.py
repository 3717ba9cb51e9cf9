"""One phase of summary.json: what its records say (PhaseStats, harness.stats.phase), and its name,
configuration, trace, server series, stress, thresholds and warnings (PhaseSummary)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field

from harness.config.metric_registry import Latency
from harness.config.scenario import SLO
from harness.stats.schema.base import ClientHealth, Distribution, Section, Stress


class Requests(Section):
    """The phase's requests by outcome: intended inside the measurement window, ok or failed, and why."""

    total: int = Field(description="requests intended inside the measurement window")
    ok: int
    failed: int
    by_status: dict[str, int]
    failure_reasons: dict[str, int] = Field(description="short, low-cardinality causes and their counts")
    retried: int = Field(0, description="requests sent again because a pooled connection was dead before any answer")
    failure_messages: dict[str, str] = Field(default_factory=dict, description="cause → the server's own sentence "
                                             "for it, as the first request failing so was told (the API key taken "
                                             "out, at most 500 characters)")


class Window(Section):
    """A span of the monotonic clock."""

    start_ns: int
    end_ns: int
    duration_s: float


class MeasuredWindow(Window):
    """The measurement window: the phase's span less its warm-up and cool-down."""

    warmup_s: float
    cooldown_s: float


class Load(Section):
    """What was asked, scheduled, sent and completed, per second."""

    target_rps: float | None = Field(None, description="the rate the scenario asked for (open loop; a trace: its "
                                     "rows over the replay); null for closed loop, batches and sessions")
    offered_rps: float | None = Field(description="the schedule's own rate: (n − 1) / span of the intended send "
                                      "times (a Poisson sample differs from its target by sampling)")
    sent_rps: float | None = Field(description="(n − 1) / span of the actual send times: the sending window")
    completed_rps: float = Field(description="ok requests per second of the measurement window (it includes "
                                 "draining the last answers)")


class Latencies(Section):
    """The latency distributions of one set of requests, in ms."""

    ttft: Distribution = Field(description="first token − sent")
    ttft_from_intended: Distribution = Field(description="first token − intended (what a waiting user sees)")
    # Named time_to_first_content before issue 61: files written then still read.
    ttft_answer: Distribution = Field(validation_alias=AliasChoices(Latency.TTFT_ANSWER.value, "time_to_first_content"),
                                      description="first answer text − sent: after any reasoning (TTFT (answer))")
    itl: Distribution = Field(description="gaps between token-bearing chunks, token-normalised")
    chunk_gap: Distribution = Field(description="gaps between token-bearing chunks, per chunk")
    tpot: Distribution = Field(description="(last − first token) / (output tokens − 1)")
    e2e: Distribution = Field(description="last token − sent")
    e2e_from_intended: Distribution


class PhaseLatencies(Latencies):
    """Every latency of the phase's ok requests, and the client's own lateness over every sent one."""

    schedule_lag: Distribution = Field(description="sent − intended, over every sent request")


class StatusLatencies(Latencies):
    """The latencies of the requests of one outcome, with their count and output tokens."""

    count: int
    output_tokens: int
    duration: Distribution = Field(description="end − sent: last byte, error or cancellation")


class LatencyByStatus(Section):
    """Latencies split by outcome: a failed request's timings never mix with the ok ones'."""

    ok: StatusLatencies
    errored: StatusLatencies
    cancelled: StatusLatencies


class Throughput(Section):
    """Per second of the measurement window."""

    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    inputs_per_s: float | None = Field(None, description="texts the requests carried, per second: above requests_per_s "
                                       "where a request carried several (an embeddings batch in one request)")


class Goodput(Section):
    """Requests within every SLO: the share and the rate, with the SLOs they were judged by."""

    requests_per_s: float = Field(description="ok requests within every SLO, per second")
    fraction: float = Field(description="share of the window's requests within every SLO")
    slo: SLO
    missed: dict[str, int] = Field(default_factory=dict, description="SLO field (ttft_ms, ttft_answer_ms, tpot_ms, "
                                   "e2e_ms) -> ok requests over that limit (one may miss several): which limit "
                                   "decided")


class Tokens(Section):
    """Token counts of the ok requests, and how the server's usage agreed with what was streamed."""

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
    reasoning_reported: int = Field(0, description="ok requests that streamed a reasoning model's thinking")
    reasoning: int = Field(0, description="of `output`, thinking tokens over those requests (the server's usage "
                           "count, else its reasoning-only chunks); the rest of theirs is the answer")
    reasoning_output: int = Field(0, description="output tokens of those requests, thinking and answer")
    images: int = Field(0, description="images sent with the ok requests' prompts (workload.images)")
    image_bytes: int = Field(0, description="their encoded size, in all (PNG or JPEG bytes, before base64)")
    image_tokens: float | None = Field(None, description="the server's prompt count beyond the text asked, per "
                                       "image, over the requests with images it counted: what an image costs in "
                                       "prompt tokens (not counted in prompt_mismatched)")


class WholeRun(Section):
    """The phase's whole span, warm-up and cool-down included."""

    window: Window
    requests: int
    ok: int
    throughput: Throughput


class Batches(Section):
    """Training-style fixed batches: send B, wait for all, repeat."""

    count: int
    batch_time_ms: Distribution = Field(description="a batch's send to its last completion")
    output_tokens_per_s_mean: float


class ServerPhase(Section):
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


class IdleCapped(Section):
    """A trace's long silences shortened (trace.max_idle_s)."""

    max_idle_s: float
    gaps: int = Field(description="silences shortened to max_idle_s")
    seconds_removed: float


class TraceUse(Section):
    """The trace file a phase replayed and what was skipped of it."""

    source: str
    rows: int
    skipped: dict[str, int]
    offered_rate: float | None = Field(None, description="rows replayed / seconds of replay (the duration when set)")
    idle_capped: IdleCapped | None = None


class Connections(Section):
    """Connections opened for requests of the phase, once its clock ran (the pool opened ahead is not
    here)."""

    opened: int = Field(description="requests that found no pooled connection free and opened one")
    connect_ms: Distribution = Field(description="how long opening took (TCP, and TLS for https); it is inside "
                                     "their TTFT and E2E, which run from the intended send")
    slow: int = Field(description="of those, over 1 s: the server's listen queue dropped a SYN and the kernel "
                      "retried (a backlog too small for the burst), or the network lost one")


class PhaseStats(Section):
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
    client_limited: bool = Field(description="the harness's own lateness could have moved some figure of the "
                                 "phase by more than client.max_shift (those are client_limited_metrics)")
    client_limited_reason: str | None
    client_limited_metrics: list[str] = Field(default_factory=list, description="the figures (metric names) the "
        "lateness could have moved by more than client.max_shift: untrusted in the table, compare and thresholds; "
        "empty with client_limited: the whole phase (judged against the lag bounds, no per-figure estimate)")
    client_moved: dict[str, float] = Field(default_factory=dict, description="metric -> the share by which the "
        "harness's lateness could have moved it, where 1% or more (harness.stats.distortion); sent_rate: the "
        "sent rate against the intended one")
    schedule_lag_bound_ms: float
    client: ClientHealth
    connections: Connections | None = Field(None, description="null: every request found a pooled connection "
                                            "(or the aiohttp client, which does not say)")

    def untrusted(self, metric: str) -> bool:
        """Whether the harness's lateness could have moved `metric` (a registry name) beyond client.max_shift:
        a figure named in client_limited_metrics, or any figure of a phase judged whole (no per-figure
        estimate)."""
        return self.client_limited and (not self.client_limited_metrics or metric in self.client_limited_metrics)


class ThresholdResult(Section):
    """One threshold of a phase: the limit as written, the observed figure, and whether it held."""

    metric: str = Field(description="e.g. ttft_p99, error_rate, output_tokens_per_s")
    limit: str = Field(description="as the scenario wrote it: '<500ms'")
    observed: float | None = Field(description="the phase's figure in `unit`; null: no data (which fails)")
    unit: str = Field(description="ms for latencies, '' for fractions, /s for rates")
    passed: bool
    untrusted: bool = Field(False, description="the harness's own lateness could have moved the figure beyond "
                            "client.max_shift (it is still judged: a limit is the user's)")


class _PhaseHead(Section):
    """A phase's name and its configuration as the scenario gave it."""

    name: str
    config: dict[str, Any] = Field(description="the phase as the scenario gave it")

    @property
    def load_kind(self) -> str:
        """The load's type as the scenario gave it: poisson, gamma, constant, ramp, trace, concurrency,
        batch…"""
        return str(self.config["load"]["type"])

    @property
    def batch_size(self) -> int | None:
        """A fixed-batch phase's batch size; None for any other load."""
        return int(self.config["load"]["size"]) if self.load_kind == "batch" else None


class SessionStats(Section):
    """Multi-turn conversations: how many, how long, and TTFT by turn."""

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
