"""The comparison section of summary.json: each training-style batch phase against the interactive phase
of the same workload (at its capacity when a sweep found one), and the conclusion in words."""

from __future__ import annotations

from pydantic import Field

from harness.stats.schema.base import Section, Stress


class PhaseComparison(Section):
    """A training-style batch phase against an interactive phase of the same workload."""

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
    inputs_ratio: float | None = Field(None, description="texts per second against the interactive phase's, where "
                                       "neither generated tokens (embeddings): the throughput compared there")
    e2e_p99_ratio: float | None = Field(None, description="p99 end-to-end latency against the interactive phase's: "
                                        "the latency compared where nothing streamed")


class Comparison(Section):
    """The batch phases against the interactive ones, and the conclusion in words."""

    phases: list[PhaseComparison]
    conclusion: list[str]
