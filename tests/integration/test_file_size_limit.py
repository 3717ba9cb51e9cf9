"""A run under a file-size limit (`ulimit -f`), end to end against the simulator: nothing lost, nothing torn, one
line for each file left out, and `harness report` reads back every part of the rescue (it read the first only,
and its figures disagreed with the run's: 67.8 req/s against 83.9)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pandas as pd

from harness.records_read import read_run_records, record_files
from harness.stats.schema import read_summary

LIMIT = 64 * 1024  # the records outgrow it at ~60 requests, the report page at ~100


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))


def _harness(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], env={**os.environ, "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=300, preexec_fn=_limited)


def test_under_a_file_size_limit_every_record_is_rescued_in_parts_and_read_back_whole(tmp_path: Path,
                                                                                     sim_url: str) -> None:
    done = _harness("run", "--endpoint", sim_url, "--rate", "100", "--requests", "300", "--prompt-tokens", "16",
                    "--output-tokens", "64", "--reports-dir", str(tmp_path / "reports"), tmp=tmp_path)
    assert done.returncode == 3, done.stderr[-3000:]  # the run's own folder could not take its records
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (folder,) = (tmp_path / f"harness-rescue-{os.getuid()}").iterdir()
    parts = record_files(folder)
    assert len(parts) > 1 and all(p.stat().st_size <= LIMIT for p in parts)
    assert all(p.read_bytes().endswith(b"\n") for p in parts)  # whole lines only
    # The page did not fit: no torn page (it was cut at exactly 64 KiB, then a traceback), one line saying so
    assert not (folder / "report.html").exists()
    assert f"report.html not written (File too large): summary.json and table.txt hold the figures; " \
           f"`harness report {folder}`" in done.stderr
    table = folder / "requests.parquet"  # where it fit, a whole table; where not, none (it was kept torn)
    assert not table.exists() or len(pd.read_parquet(table)) > 0
    assert f"{parts[1].parent.name}/ … {parts[-1].parent.name}/" in (folder / "README.txt").read_text()

    saved = read_summary(folder / "summary.json")
    records = list(read_run_records(folder))
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids)) == sum(p.requests.total for p in saved.phases) > 60

    report = subprocess.run([sys.executable, "-m", "harness", "report", str(folder), "--no-write"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    run_line = next(line for line in done.stdout.splitlines() if line.startswith("interactive:"))
    assert run_line in report.stdout  # the same figures as the run's own, read from every part
