"""Shared test helpers: the harness CLI as a user runs it, in a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def harness(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)

SHARED_TRACES = ROOT.parent / "shared" / "traces"
NO_TRACES = f"needs the public request traces in {SHARED_TRACES} (shared/traces beside this checkout)"
# CI fails when anything was skipped for this reason (tests/conftest.py), so CI still runs them.
needs_traces = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=NO_TRACES)


def phase_json(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A phase's statistics as they appear in summary.json."""
    from harness.stats.phase import summarize_phase

    return summarize_phase(*args, **kwargs).to_json()
