"""A run longer than its records_in_memory, run as a user runs it (CLI, the bundled simulator on loopback): the
phases past the cap are summarised from histograms and say so, every record still reaches requests.jsonl and
the totals, the report draws a sample and says which, and `harness report` rebuilds the very same summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.report.offline import rebuild
from tests.helpers import ROOT

SCENARIO = """
name: long
workload: {prompt_tokens: 16, output_tokens: 4}
slo: {ttft_ms: 500}
client: {records_in_memory: 1000}
phases:
  - {name: a, load: {type: constant, rate: 300, requests: 600}}
  - {name: b, load: {type: constant, rate: 300, requests: 600}}
  - {name: c, warmup_s: 0.2, load: {type: constant, rate: 300, requests: 300}}
"""


def test_a_run_past_its_records_in_memory_keeps_every_record_and_rebuilds_the_same(sim_url: str,
                                                                                    tmp_path: Path) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text(SCENARIO)
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                           "--progress", "off", "--reports-dir", str(tmp_path / "runs")], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    phases = {p["name"]: p for p in summary["phases"]}
    assert sum(p["whole_run"]["requests"] for p in phases.values()) == len(lines) == 1500
    folded = [name for name, p in phases.items() if any("records_in_memory" in w for w in p["warnings"])]
    assert folded == ["c"]  # a and b fit (1,200 taken when b ended); c began past the cap
    assert phases["c"]["requests"]["ok"] > 0 and phases["c"]["latency_ms"]["ttft"]["count"] > 0
    assert "requests.parquet is not written" in proc.stderr and not (run_dir / "requests.parquet").exists()
    assert "draw 1 record in 2" in (run_dir / "report.html").read_text()
    rebuilt = rebuild(run_dir).summary.to_json()
    for live, again in zip(summary["phases"], rebuilt["phases"], strict=True):
        for key in ("requests", "latency_ms", "throughput", "goodput", "tokens", "whole_run", "warnings"):
            assert again[key] == live[key], (live["name"], key)


def test_a_run_past_its_cap_whose_folder_is_deleted_rescues_every_record(sim_url: str, tmp_path: Path) -> None:
    """The records it let go of were only in the deleted folder: read back from the file the run holds open."""
    import shutil
    import time

    scenario = tmp_path / "long.yaml"
    scenario.write_text(SCENARIO.replace("requests: 600}}\n  - {name: b", "requests: 3000}}\n  - {name: b"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                             "--progress", "off", "--reports-dir", str(runs)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(600):
        found = list(runs.glob("*/requests.jsonl"))
        if found and found[0].read_bytes().count(b"\n") > 1200:  # well past the 1,000 records it keeps
            shutil.rmtree(found[0].parent)
            break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 3 and "Traceback" not in err, err[-3000:]
    line = next(line for line in err.splitlines() if "records were written to" in line)
    folder = Path(line.rsplit(" to ", 1)[1].strip())
    try:
        ids = [json.loads(line)["request_id"] for line in (folder / "requests.jsonl").read_text().splitlines()]
        summary = json.loads((folder / "summary.json").read_text())
        assert len(ids) == len(set(ids)) > 1000
        assert sum(p["whole_run"]["requests"] for p in summary["phases"]) == len(ids)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
