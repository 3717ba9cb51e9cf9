"""A run whose folder fills up or vanishes: it stops sending at the first failed write, says so in one line, and
every record (and the reports) reach a rescue folder it names; exit 3, never a traceback or a dump of records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

QUICK = ["--rate", "40", "--requests", "300", "--output-tokens", "8", "--progress", "off"]


def _rescued(stderr: str) -> Path:
    line = next(line for line in stderr.splitlines() if "records were written to" in line)
    return Path(line.rsplit(" to ", 1)[1].strip())


def _check_rescue(proc: subprocess.CompletedProcess[str], cause: str) -> None:
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr) < 20_000, proc.stderr[-2000:]
    assert proc.stderr.count(cause) <= 3, proc.stderr  # said at the failure, at the end and in the exit line
    folder = _rescued(proc.stderr)
    try:
        summary = json.loads((folder / "summary.json").read_text())
        records = (folder / "requests.jsonl").read_text().splitlines()
        assert all(json.loads(line)["request_id"] for line in records)  # every line a whole record
        assert summary["phases"][0]["requests"]["total"] == len(records) > 0  # every record sent, counted
        written = summary["run"]["records_file"]
        assert cause in written["failure"] and written["rescued_to"] == str(folder)
        assert 0 < len(records) < 300  # it stopped sending at the failure
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 96 KiB filesystem of its own (tmpfs): room for a run's first records, not for all of them."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_run_and_every_record_is_rescued(sim_url: str, small_disk: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, *QUICK,
                           "--reports-dir", str(small_disk)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    _check_rescue(proc, "No space left on device")


def test_a_run_folder_deleted_mid_run_is_rescued(sim_url: str, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, *QUICK,
                             "--reports-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(300):
        found = list(tmp_path.glob("*/requests.jsonl"))
        if found and found[0].stat().st_size > 0:
            shutil.rmtree(found[0].parent)
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=120)
    _check_rescue(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), "the run directory was deleted")
    assert not os.listdir(tmp_path)


def test_a_lost_terminal_ends_the_run_as_sigterm_does_with_its_summary(sim_url: str, tmp_path: Path) -> None:
    """SIGHUP (an ssh session dropped) and the terminal gone with it (its pipes closed): the run stops sending,
    lets the requests in flight finish, writes its summary and exits 129 — no write to the dead terminal kills it."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "20",
                             "--requests", "400", "--output-tokens", "32", "--progress", "lines",
                             "--reports-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    for _ in range(300):
        found = list(tmp_path.glob("*/requests.jsonl"))
        if found and found[0].stat().st_size > 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the terminal is gone: nobody reads what the run prints from now on
    proc.stderr.close()
    assert proc.wait(timeout=120) == 129
    (run_dir,) = (d for d in tmp_path.iterdir() if d.is_dir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["stopped"] == "SIGHUP" and not summary["run"]["complete"]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert summary["phases"][0]["requests"]["total"] == len(records) < 400
    assert sum(r["status"] == "ok" for r in records) == len(records)  # in flight at the signal: finished, kept
