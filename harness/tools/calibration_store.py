"""Where `harness calibrate` keeps this machine's result, so every later run can compare with it."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from harness.doors import json_value


class Machine(TypedDict):
    host: str
    cpus: int | None
    python: str


class Spread(TypedDict):
    """|harness − ground truth| in ms, over the requests or gaps compared (None: none were)."""

    p50: float | None
    p99: float | None
    max: NotRequired[float | None]


class Errors(TypedDict):
    """The client's timing against the simulator's ground truth, over the requests compared."""

    requests_compared: int
    ttft_error_ms: Spread
    tpot_error_ms: Spread
    chunk_gap_error_ms: Spread
    token_delivery_ms: Spread
    first_token_late_ms: Spread
    server_read_ms: Spread


class Level(Errors):
    """One number of streams: the client's fidelity against the simulator's ground truth, and its cost."""

    concurrency: int
    lockstep: bool
    schedule_lag_p99_ms: float | None
    requests: int
    ok: int
    output_tokens_per_s: float
    requests_per_s: float
    harness_cpu_ms_per_1k_tokens: float | None
    client_limited: bool
    client_limited_reason: str | None


class Ceiling(TypedDict):
    streams: int
    output_tokens: int
    stream_writes: str
    output_tokens_per_s: float
    requests_per_s: float
    harness_cpu_ms_per_1k_tokens: float | None


class Fidelity(TypedDict):
    ttft_ms: float
    itl_ms: float
    output_tokens: int
    stream_writes: str
    levels: list[Level]


class Calibration(TypedDict):
    """calibration.json (schema harness.calibration/1)."""

    schema: str
    machine: Machine
    created: str
    fidelity: Fidelity
    ceiling: Ceiling  # one event a write: the shape users meet
    ceiling_step: NotRequired[Ceiling]  # a step's tokens a write


def calibration_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "calibration.json"


def machine() -> Machine:
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}


def load_calibration() -> Calibration | None:
    """This machine's calibration, if one was made here."""
    try:
        data = json_value(calibration_path().read_bytes())
    except (OSError, ValueError):  # none made here, or not one the harness wrote: as if none
        return None
    return cast(Calibration, data) if isinstance(data, dict) and data.get("machine") == machine() else None


def save_calibration(report: Calibration) -> Path:
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def ceiling_tokens_per_s() -> float | None:
    """This machine's client ceiling (output tokens/s), when `harness calibrate` measured one here."""
    calibration = load_calibration()
    return None if calibration is None else float(calibration["ceiling"]["output_tokens_per_s"])
