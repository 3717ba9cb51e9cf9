"""Records read back from a run's folder: its `requests.jsonl`, and the parts a rescue under a file-size limit
wrote beside it (`part-2/requests.jsonl`, `part-3/…`), each line through the record's door (`record_from`); and
the run folders a path holds (a run, or the runs of a `--repeat` folder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from harness.errors import ScenarioError, UsageError
from harness.records import RequestRecord, record_from
from harness.voice import QUIET, Voice

RECORDS = "requests.jsonl"


def part_dir(folder: Path, part: int) -> Path:
    """Where part `part` (1 first) of a run's records goes: the folder itself, then `part-2/`, `part-3/`…"""
    return folder if part == 1 else folder / f"part-{part}"


def run_dirs(path: Path) -> list[Path]:
    """A run directory, or the runs of a `--repeat` folder, in name order (the harness's own folder
    shapes)."""
    if (path / "summary.json").is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if (p / "summary.json").is_file()) if path.is_dir() else []
    if not found:
        raise ScenarioError(f"{path}: neither a run directory (summary.json) nor a directory of runs")
    return found


def record_files(run_dir: Path) -> list[Path]:
    """The run's records files in the order they were written; the parts stop at the first one missing."""
    found: list[Path] = []
    while (path := part_dir(run_dir, len(found) + 1) / RECORDS).is_file():
        found.append(path)
    return found


def read_run_records(run_dir: Path, voice: Voice = QUIET) -> Iterator[RequestRecord]:
    """Every record of a run folder, its rescue parts included (`harness report` read only the first)."""
    for path in record_files(run_dir):
        yield from read_records(path, voice)


def read_records(path: Path, voice: Voice = QUIET) -> Iterator[RequestRecord]:
    """Records back from a `requests.jsonl`, for offline reports and tests.

    A torn last line (the process was killed mid-write) is skipped, with a warning; a bad line anywhere
    else means the file is not a records file.
    """
    bad: tuple[int, str, bool] | None = None  # a line that was not a record: number, why, newline-ended
    with path.open(encoding="utf-8", errors="replace") as fh:  # line by line: a long run's file may not fit
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if bad is not None:
                break
            try:
                yield record_from(orjson.loads(line))
            except ValueError as exc:  # orjson's JSONDecodeError is one
                bad = (n, str(exc), line.endswith("\n"))
    if bad is None:
        return
    # Torn: the last line, cut before its newline (every record is written whole, newline included); any other
    # line that is not a record means the file is not a records file.
    n, why, whole = bad
    if whole or n != _last_line(path):
        raise UsageError(f"{path}:{n}: not a request record ({why})") from None
    voice.warn(f"{path}:{n}: skipped a torn last line (the run was killed while writing it)")


def _last_line(path: Path) -> int:
    """The number of the file's last line that holds anything."""
    last = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                last = n
    return last
