"""Where `harness calibrate` keeps this machine's result, so every later run can compare with it."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any


def calibration_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "calibration.json"


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version()}


def load_calibration() -> dict[str, Any] | None:
    """This machine's calibration, if one was made here."""
    try:
        data: dict[str, Any] = json.loads(calibration_path().read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("machine") == machine() else None


def save_calibration(report: dict[str, Any]) -> Path:
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def ceiling_tokens_per_s() -> float | None:
    """This machine's client ceiling (output tokens/s), when `harness calibrate` measured one here."""
    calibration = load_calibration()
    return None if calibration is None else float(calibration["ceiling"]["output_tokens_per_s"])
