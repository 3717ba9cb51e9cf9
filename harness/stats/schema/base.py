"""The sections every part of summary.json shares: the frozen model, a latency distribution, the client's
self-check and where the stress landed on the accelerator."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from harness.config.base import Changeable


class Section(Changeable):
    """A frozen part of summary.json: unknown fields refused, aliases (p99.9, schema) honoured both ways."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Distribution(Section):
    """Exact from the records; percentiles within 0.1% past client.records_in_memory (the phase warns); None:
    none."""

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


class ClientHealth(Section):
    """The harness's self-check over the phase: was the client late, and why."""

    loop_lag_p99_ms: float | None
    cpu_share: float | None = Field(description="of one core, by the event loop's thread")
    cpu_seconds: float | None = Field(description="the whole process's, the request-building thread's included")
    runq_share: float | None = Field(None, description="of the time the harness's main thread was runnable, the "
                                     "share it waited for a CPU (Linux /proc/self/schedstat)")
    load_per_core: float | None = Field(None, description="the machine's 1-minute load average over its cores")
    verdict: Literal["ok", "stalled", "not_scheduled", "saturated"] = Field("ok", description="ok, or why the "
        "harness was late: saturated (its core full), not_scheduled (waiting for a CPU held by another), stalled")
    loop_wait_quantiles_ms: list[float] | None = Field(None, description="the wait a token arriving at a random "
        "instant met for the event loop (time-weighted), at 0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.9 and 100% "
        "(what the per-figure judgement reads, offline too)")
    loop_tick_quantiles_ms: list[float] | None = Field(None, description="the same quantiles of the lag per wake-up "
        "(each tick's, less the timer's rounding): what one event met")
    ceiling_tokens_per_s: float | None = Field(None, description="this machine's `harness calibrate` ceiling")
    ceiling_share: float | None = None


class Stress(Section):
    """Where the phase's stress landed on the accelerator (docs/output.md, "Where the stress lands")."""

    source: Literal["simulator", "estimate"] = Field(description="the simulator's own account, or an estimate "
                                                     "from measured latency and batch (--hardware)")
    basis: str = Field(description="what the figures rest on, in words")
    memory_bound_share: float | None = Field(None, description="share of step time in memory-bound steps")
    busy_share: float | None = Field(None, description="share of the phase's wall time the engine was stepping")
    mbu: float | None = Field(None, description="bytes read from device memory / (step time × peak bandwidth)")
    mfu: float | None = Field(None, description="FLOPs done / (step time × peak FLOP/s of the weight type)")
    binding: Literal["memory bandwidth", "compute", "link", "KV capacity"] | None = Field(
        None, description="what bound the device (predictions): KV capacity when the engine had to preempt, the "
                          "link when its all-reduces took longer than its reads and arithmetic, else memory "
                          "bandwidth or compute, whichever bound most of the step time")
