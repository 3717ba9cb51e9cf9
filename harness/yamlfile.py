"""A YAML file a user gives (a scenario, a presets file), read within bounds: a size cap, and a nesting too
deep for the parser said in one line instead of a 3,000-line RecursionError."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.limits import SCENARIO_BYTES


def read_yaml(path: Path) -> object:
    """The file's YAML; ValueError with one line saying what is wrong (where, when the parser knows)."""
    try:
        if path.stat().st_size > SCENARIO_BYTES:
            raise ValueError(f"over {SCENARIO_BYTES >> 20} MiB: not a scenario or presets file")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{where}{getattr(exc, 'problem', None) or 'invalid YAML'}") from None
    except RecursionError:
        raise ValueError("nested too deep to read (thousands of levels): not a scenario") from None
