"""Shared test helpers: the harness CLI as a user runs it, in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.config.workload import Workload
from harness.workload.requests import RequestSource, RequestSpec

ROOT = Path(__file__).resolve().parent.parent


def harness(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)

TRACES = ROOT / "scenarios" / "traces"  # the public traces shipped with the project, gzipped
AZURE_TRACE = TRACES / "AzureLLMInferenceTrace_conv.csv.gz"
MOONCAKE_TRACE = TRACES / "mooncake_conversation_trace.jsonl.gz"


def phase_json(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A phase's statistics as they appear in summary.json."""
    from harness.stats.phase import phase_stats

    return phase_stats(*args, **kwargs).to_json()


def build_requests(workload: Workload, phase: str, phase_index: int, count: int, seed: int, run_id: str,
                   batch_size: int | None = None) -> list[RequestSpec]:
    """The first `count` requests of a phase, as the plan would send them."""
    return RequestSource(workload, phase, phase_index, seed, run_id, batch_size).take(count)
