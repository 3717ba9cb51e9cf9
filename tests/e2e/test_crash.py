"""kill -9 of the harness: the bundled simulator goes with it, and the records left behind still report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT, harness

LONG = """
name: long
workload: {prompt_tokens: 32, output_tokens: 64}
phases:
  - name: open
    load: {type: constant, rate: 20, duration_s: 60}
"""


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is left


def test_kill_9_takes_the_simulator_along_and_the_records_still_report(tmp_path: Path) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text(LONG)
    reports = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--reports-dir", str(reports),
                             "--no-pin"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            csvs = list(reports.glob("*/requests.csv"))
            if csvs and len(csvs[0].read_text().splitlines()) > 10:
                break
            time.sleep(0.1)
        sims = _children(proc.pid)
        assert sims, "no bundled simulator child found"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    gone_by = time.monotonic() + 2.0
    while time.monotonic() < gone_by and any(_alive(p) for p in sims):
        time.sleep(0.05)
    leftover = [p for p in sims if _alive(p)]
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    assert not leftover, "the simulator outlived the harness by more than 2 s"

    (run_dir,) = reports.iterdir()
    taken = [line for line in (run_dir / "requests.jsonl").read_text().splitlines() if line.endswith("}")]
    with (run_dir / "requests.jsonl").open("a") as fh:
        fh.write('{"request_id": "torn", "pha')  # what a kill mid-write leaves
    report = harness("report", str(run_dir))  # the killed run left no summary: this one is written
    assert report.returncode == 0, report.stderr
    assert "written:" in report.stdout
    assert "torn last line" in report.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["complete"] is False
    assert summary["phases"][0]["requests"]["total"] == len(taken) >= 10  # every whole record, none invented


def test_closed_stdout_and_stderr_or_an_ascii_terminal_never_stop_a_run(tmp_path: Path) -> None:
    """`>&- 2>&-` aborted the run inside uvloop with an empty folder; `PYTHONIOENCODING=ascii` ended in a
    traceback after the results were saved. Both now run to the end, exit 0, summary written."""
    quick = [sys.executable, "-m", "harness", "run", "--rate", "10", "--requests", "4", "--output-tokens", "4",
             "--progress", "off"]
    closed = subprocess.run(["bash", "-c", " ".join([*quick, "--reports-dir", str(tmp_path / "closed"),
                                                      ">&-", "2>&-"])], cwd=ROOT, timeout=120)
    assert closed.returncode == 0
    assert list((tmp_path / "closed").glob("*/summary.json"))
    ascii_only = subprocess.run([*quick, "--reports-dir", str(tmp_path / "ascii")], cwd=ROOT, capture_output=True,
                                timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert ascii_only.returncode == 0, ascii_only.stderr[-1000:]
    assert b"Traceback" not in ascii_only.stderr and b"ok / errored / cancelled" in ascii_only.stdout
