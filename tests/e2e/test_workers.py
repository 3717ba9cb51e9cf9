"""`harness run --workers 2`: two processes, one shard each, merged; a worker killed mid-run is reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.config.scenario import load_scenario
from harness.workload.plan import plan_phase
from harness.workload.shards import Shard
from tests.helpers import ROOT, harness

QUICK = ["--rate", "10", "--requests", "20", "--batch", "4", "--output-tokens", "8", "--progress", "lines"]


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = (d for d in reports.iterdir() if d.is_dir())
    return run_dir


def test_two_workers_send_the_whole_schedule_once(sim_url: str, tmp_path: Path) -> None:
    proc = harness("run", "--endpoint", sim_url, *QUICK, "--workers", "2", "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [20, 8] and summary["run"]["complete"]
    shards = summary["run"]["shards"]
    assert [s["index"] for s in shards] == [0, 1] and sum(s["records"] for s in shards) == 28
    start_at = json.loads((Path(shards[0]["run_dir"]) / "summary.json").read_text())["run"]["shard"]["start_at"]
    scenario = load_scenario(run_dir / "scenario.yaml")
    run_id = Shard(0, 2).run_id(scenario.name, start_at)
    planned = {s.request_id for i in range(2) for s in plan_phase(scenario, i, run_id).specs}  # type: ignore[union-attr]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == sorted(planned)  # each request of the one schedule, once
    # Both workers began on the common start, within the harness's own start-up jitter.
    starts = [min(r["intended_ns"] for r in records if int(r["request_id"].rsplit("-", 1)[1]) % 2 == i)
              for i in range(2)]
    assert abs(starts[0] - starts[1]) < 100_000_000


def test_a_worker_killed_mid_run_is_named_and_the_rest_kept(sim_url: str, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "8",
                             "--requests", "40", "--output-tokens", "8", "--progress", "lines", "--workers", "2",
                             "--reports-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    pids = None
    for _ in range(200):
        found = list(tmp_path.glob("*/workers/pids"))
        if found and (records := list(tmp_path.glob("*/workers/1/*/requests.jsonl"))) and \
                records[0].stat().st_size > 0:
            pids = dict(line.split() for line in found[0].read_text().splitlines())
            break
        time.sleep(0.1)
    assert pids is not None, "worker 1 never wrote a record"
    os.kill(int(pids["1"]), signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "worker 1 died (exit -9)" in err and "finished records kept" in err and "never sent" in err
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert not summary["run"]["complete"] and summary["run"]["stopped"] is None
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[1]["stopped"] == "worker died (exit -9)" and not shards[1]["complete"]
    assert shards[0]["records"] == 20 and 0 < shards[1]["records"] < 20  # shard 0's share whole, 1's cut short
    assert summary["phases"][0]["requests"]["ok"] == shards[0]["records"] + shards[1]["records"]
