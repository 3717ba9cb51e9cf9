"""A run's own folder: made atomically under the reports folder, and removed again when nothing was written to
it."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path


def new_run_dir(reports_dir: Path, scenario_name: str) -> Path:
    """A new, empty run directory, created here: `mkdir` is atomic, so runs started in the same second by
    several processes each get their own (a check for existence and a later create let two runs share one)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    reports_dir.mkdir(parents=True, exist_ok=True)
    for suffix in range(1, 10_000):
        path = reports_dir / (f"{stamp}-{scenario_name}" + (f"-{suffix}" if suffix > 1 else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{reports_dir}: 10,000 runs of {scenario_name} in one second")


@contextlib.contextmanager
def claimed(run_dir: Path) -> Iterator[Path]:
    """A new run directory that is removed again if what fills it fails before writing anything (bad input
    found late: no empty folder is left behind looking like a run)."""
    try:
        yield run_dir
    except BaseException:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only an empty one
        raise
