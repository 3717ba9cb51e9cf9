"""summary.json as types: the run and each phase, every section a frozen model, split by subject — the run
header (schema.run), a phase (schema.phase), the batch-versus-interactive comparison (schema.comparison) and
the sections they share (schema.base). Built once (harness.stats.summary), serialised once
(`Summary.to_json`), read back only through `read_summary` (the schema version checked); docs/summary.md is
generated from them (`python -m harness.stats.reference`). Latencies in ms, rates per second, timestamps
monotonic ns."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from harness.config.base import first_error
from harness.devices.catalogue import catalogue, within
from harness.doors import json_value
from harness.errors import PresetError, ScenarioError
from harness.stats.schema.base import ClientHealth, Distribution, Section, Stress
from harness.stats.schema.comparison import Comparison, PhaseComparison
from harness.stats.schema.phase import (
    Batches,
    Connections,
    Goodput,
    IdleCapped,
    Latencies,
    LatencyByStatus,
    Load,
    MeasuredWindow,
    PhaseLatencies,
    PhaseStats,
    PhaseSummary,
    Requests,
    ServerPhase,
    SessionStats,
    StatusLatencies,
    ThresholdResult,
    Throughput,
    Tokens,
    TraceUse,
    WholeRun,
    Window,
)
from harness.stats.schema.run import (
    Anchor,
    EndpointInfo,
    MergedShard,
    RecordsFile,
    RunHeader,
    ScrapeInfo,
    ServerTokenizer,
    ShardInfo,
    ShardLoss,
)
from harness.stats.schema.sweeps import SweepResult, find_sweeps

SUMMARY_SCHEMA = "harness.summary/2"

__all__ = ["SUMMARY_SCHEMA", "Anchor", "Batches", "ClientHealth", "Comparison", "Connections", "Distribution",
           "EndpointInfo", "Goodput", "IdleCapped", "Latencies", "LatencyByStatus", "Load", "MeasuredWindow",
           "MergedShard", "PhaseComparison", "PhaseLatencies", "PhaseStats", "PhaseSummary", "RecordsFile",
           "Requests", "RunHeader", "ScrapeInfo", "Section", "ServerPhase", "ServerTokenizer", "SessionStats",
           "ShardInfo", "ShardLoss", "StatusLatencies", "Stress", "Summary", "ThresholdResult", "Throughput",
           "Tokens", "TraceUse", "WholeRun", "Window", "read_summary"]


class Summary(Section):
    """The whole of summary.json."""

    schema_: str = Field(SUMMARY_SCHEMA, alias="schema")
    run: RunHeader
    phases: list[PhaseSummary]
    server_metrics: ScrapeInfo | None = None
    comparison: Comparison

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        return cls.model_validate(data)

    @functools.cached_property
    def sweeps(self) -> tuple[SweepResult, ...]:
        """The run's sweeps and their knees, found once (schema/sweeps.py)."""
        return find_sweeps(self.phases)


_SUMMARY_HINT = "give a run's folder or its summary.json, as a run of this harness wrote it"


def read_summary(path: Path) -> Summary:
    """A saved summary.json as types, or a one-line error naming the file: unreadable, not JSON, another
    schema version, or fields this version does not know."""
    try:
        data = json_value(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ScenarioError(f"{path}: cannot read a summary ({exc})", hint=_SUMMARY_HINT) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SUMMARY_SCHEMA or not isinstance(data, dict):
        raise ScenarioError(f"{path}: schema {schema!r}; this harness reads {SUMMARY_SCHEMA!r}")
    try:
        with within(catalogue().beside(path)):  # the presets its run used name its devices; ours stay as they are
            return Summary.from_json(data)
    except ValidationError as exc:
        raise ScenarioError(f"{path}: {first_error(exc)}") from None
    except PresetError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
