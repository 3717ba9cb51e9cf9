"""Two shards of one run, as two processes against the simulator, merged: the single-process schedule's requests."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import load_scenario
from harness.workload.plan import plan_phase
from harness.workload.shards import Shard
from tests.helpers import ROOT, harness


def test_two_shards_merge_into_the_single_process_run(sim_url: str, tmp_path: Path) -> None:
    start_at = round(time.time() + 4, 3)
    flags = ["--endpoint", sim_url, "--rate", "10", "--requests", "20", "--batch", "4", "--output-tokens", "8",
             "--start-at", str(start_at), "--progress", "off"]
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", *flags, "--shard", f"{i}/2",
                               "--reports-dir", str(tmp_path / f"s{i}")], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    dirs = [next((tmp_path / f"s{i}").iterdir()) for i in range(2)]
    merged = harness("merge", *map(str, dirs), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [20, 8]
    assert summary["run"]["complete"] and [s["index"] for s in summary["run"]["shards"]] == [0, 1]
    # The very requests one process would have sent: the ids of the plan with the run id every shard derived.
    scenario = load_scenario(tmp_path / "merged" / "scenario.yaml")
    run_id = Shard(0, 2).run_id(scenario.name, start_at)
    planned = {s.request_id for i in range(2) for s in plan_phase(scenario, i, run_id).specs}  # type: ignore[union-attr]
    records = [json.loads(line) for line in (tmp_path / "merged" / "requests.jsonl").read_text().splitlines()]
    assert {r["request_id"] for r in records} == planned and len(records) == len(planned)
    # Both shards began on the common start, within the harness's own start-up jitter.
    starts = [min(r["intended_ns"] for r in records if int(r["request_id"].rsplit("-", 1)[1]) % 2 == i)
              for i in range(2)]
    assert abs(starts[0] - starts[1]) < 100_000_000


def test_shard_flags_are_checked(tmp_path: Path) -> None:
    for args, problem in ((["--shard", "2/2", "--start-at", "1"], "index must be 0 to 1"),
                          (["--shard", "0/2"], "needs --start-at")):
        result = CliRunner().invoke(main, ["run", "--rate", "1", "--requests", "1", *args, "--reports-dir",
                                           str(tmp_path)])
        assert result.exit_code == 2 and problem in result.output, result.output
