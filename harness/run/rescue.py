"""Where a run's records and reports go when its own directory cannot take them — a full disk, the directory
deleted under the run: the first of a few fallback folders that does, named on stderr and in the summary."""

from __future__ import annotations

import contextlib
import os
import resource
import stat
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.records import RecordWriter, RequestRecord, write_parquet
from harness.records_read import part_dir


def rescue_dirs(run_dir: Path) -> list[Path]:
    """Candidates, in order: the temporary directory (often another filesystem), then the user's cache. The
    temporary one is the user's own (`harness-rescue-<uid>`): a shared /tmp is anyone's to plant a name in."""
    return [Path(tempfile.gettempdir()) / f"harness-rescue-{os.getuid()}" / run_dir.name,
            Path.home() / ".cache" / "harness" / "rescue" / run_dir.name]


def private_dir(path: Path) -> None:
    """`path` made, or found, as a real directory owned by this user and closed to others (0700); OSError
    otherwise. Never through a symlink: one planted there would take the records elsewhere."""
    for folder in (path.parent, path):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise PermissionError(f"{folder}: not a directory of this user (a symlink, or another user's): not used")
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)  # ours, but open to others (an older harness made it so): closed now


def file_size_limit() -> int | None:
    """The most bytes a file of this process may hold (`ulimit -f`), or None when there is no limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def rescue(records: Iterable[RequestRecord], run_dir: Path, scenario_yaml: str) -> Path | None:
    """Every record (and the scenario) written to the first fallback folder that takes them all; None if none
    did (the records then exist only in this process's memory, and the caller says so). Under a file-size
    limit (the very cause, often) the records go in parts that each stay under it: the folder's own
    requests.jsonl, then part-2/requests.jsonl, part-3/…"""
    kept = iter(records)  # read once: past records_in_memory they come back from the records file
    for folder in rescue_dirs(run_dir):
        try:
            folder.parent.parent.mkdir(parents=True, exist_ok=True)
            private_dir(folder)
            (folder / "scenario.yaml").write_text(scenario_yaml, encoding="utf-8")
        except OSError:
            continue
        if _write_parts(kept, folder, file_size_limit()):
            return folder
    return None


def _write_parts(records: Iterable[RequestRecord], folder: Path, limit: int | None) -> bool:
    """`records` into `folder`, in parts under `limit` bytes a file when there is one; whether all were
    taken."""
    part, writer = 1, None
    try:
        for rec in records:
            if writer is None:
                writer = RecordWriter(part_dir(folder, part))
            writer.write(rec)
            if writer.failure is not None:
                return False
            if limit is not None:
                writer.flush()
                if _largest(writer) > limit * 0.75:  # the next record must still fit under the limit
                    writer.close()
                    writer, part = None, part + 1
    except OSError:
        return False
    if writer is not None:
        writer.close()
        return writer.failure is None
    return True


def _largest(writer: RecordWriter) -> int:
    return max(path.stat().st_size for path in (writer.jsonl_path, writer.csv_path))


def save_parquet(path: Path, records: Sequence[RequestRecord]) -> None:
    """The Parquet copy of the records, where the disk takes it: it is a convenience beside requests.jsonl."""
    if records:
        try:
            write_parquet(path, records)
        except OSError:  # a part-written table is not a table (a file-size limit cut it at 64 KiB): none at all
            path.unlink(missing_ok=True)
