"""The accelerator matrix (`harness predict --accelerators … --json`) as typed dictionaries: per accelerator a
column, per phase a row of figures taken from that accelerator's predicted `PhaseSummary`, and per phase the
choice. Plain JSON on the wire; keys checked by mypy wherever the matrix is built or read."""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

Ranking = Literal["cost", "tokens/s", "capacity", "TTFT p99"]


class MatrixRow(TypedDict):
    """One phase on one accelerator: the figures its predicted summary gave, and their price."""

    output_tokens_per_s: float
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    goodput_share: float
    good_tokens_per_s: float  # all of a batch phase's; an interactive phase's within the SLOs
    cost_per_m_tokens: float | None  # dollars per million of those tokens (with a price)
    memory_bound_share: float | None
    mbu: float | None
    mfu: float | None
    binding: str | None  # memory bandwidth, compute, link or KV capacity (Stress.binding)


class FoundCapacity(TypedDict):
    """The highest Poisson rate within the SLOs that `harness search` found on this accelerator."""

    phase: str  # the first open-loop phase, searched
    rps: float | None
    interval_rps: list[float] | None


class MatrixColumn(TypedDict, total=False):
    """One accelerator: whether the model fits, on how many devices, and each phase's row."""

    accelerator: Required[str]
    fits: Required[bool]  # False: no tensor parallelism up to 8 holds the model; nothing else is set
    tp: int
    price_per_hour: float | None
    device: str  # "GPU", or the system a preset's device is
    needs: str | None  # the scenario's own setting it fits only with
    phases: dict[str, MatrixRow]
    capacity: FoundCapacity | None


class Choice(TypedDict):
    """Per phase, the accelerator to choose, by what, and the one after it."""

    accelerator: str | None  # None: none met an interactive phase's SLOs
    by: Ranking | None
    runner_up: str | None
    unpriced: NotRequired[list[str]]  # ranked by cost: the candidates no price was given for (not ranked, named)


class Matrix(TypedDict):
    """The whole matrix: the scenario, its SLOs, each phase's kind, a column per accelerator, the choices."""

    scenario: str
    slo: dict[str, float]
    phase_kinds: dict[str, Literal["batch", "interactive"]]
    columns: list[MatrixColumn]
    best: dict[str, Choice]
