"""`--workers` under faults, with real processes and real signals: a worker frozen for good is killed after
`client.worker_silence_s` and the run ends incomplete; Ctrl-C of the parent stops the workers and still merges
what they wrote; a worker killed while none of its requests has ended has its loss counted exactly as the
server saw it; fewer users than workers (or than shards by hand) is said up front and the run is complete. No
clock is judged here (the generous bounds hold on a busy machine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.errors import EXIT_HARNESS, EXIT_STOPPED
from harness.run.distributed.sharding import LEAD_S
from harness.workload.shards import Shard
from tests.helpers import ROOT, arrived_at_sim, only_run_dir, shard_ids, worker_pid


def _workers(tmp_path: Path, sim_url: str, scenario: str, workers: int = 2) -> subprocess.Popen[str]:
    path = tmp_path / "scenario.yaml"
    path.write_text(scenario)
    return subprocess.Popen([sys.executable, "-m", "harness", "run", str(path), "--endpoint", sim_url,
                             "--progress", "lines", "--workers", str(workers),
                             "--reports-dir", str(tmp_path / "reports")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


FROZEN = """name: frozen
workload: {prompt_tokens: 16, output_tokens: 8}
client: {worker_silence_s: 6}
phases:
  - {name: open, load: {type: constant, rate: 12, requests: 120}}
"""


def test_a_worker_frozen_for_good_is_killed_after_the_stated_silence_and_the_run_ends(
        sim_url: str, tmp_path: Path) -> None:
    proc = _workers(tmp_path, sim_url, FROZEN)
    os.kill(worker_pid(tmp_path / "reports", 1, 300), signal.SIGSTOP)
    stopped_at = time.monotonic()
    _, err = proc.communicate(timeout=120)
    # Its share was 60 requests at 6 a second: it would have run 10 s. The silence limit ended it first.
    assert time.monotonic() - stopped_at < 60
    assert proc.returncode == EXIT_HARNESS, err
    assert "worker 1 has said nothing for" in err and "6 s at most (client.worker_silence_s)" in err
    assert "worker 1 said nothing for 6 s: killed" in err
    assert "worker 1 died (silent for" in err and "never sent" in err
    summary = json.loads((only_run_dir(tmp_path / "reports") / "summary.json").read_text())
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[1]["stopped"].startswith("worker died (silent for") and not shards[1]["complete"]
    assert shards[0]["records"] == 60 and shards[1]["loss"]["never_sent"] > 0
    assert summary["phases"][0]["incomplete"] == "shard 1/2 died in it"


IN_FLIGHT = """name: in-flight
workload: {prompt_tokens: 16, output_tokens: 400}
phases:
  - {name: open, load: {type: constant, rate: 20, requests: 60}}
"""


def _started(reports: Path, index: int) -> tuple[int, float]:
    """Worker `index`'s process id and its --start-at, from its command line (as `ps` shows it)."""
    for _ in range(300):
        if (pids := list(reports.glob("*/workers/pids"))) and (found := pids[0].read_text()):
            pid = int(dict(line.split()[:2] for line in found.splitlines())[str(index)])
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            return pid, float(args[args.index("--start-at") + 1])
        time.sleep(0.1)
    raise AssertionError("the workers were never started")


def test_a_worker_killed_with_requests_in_flight_has_its_loss_counted_as_the_server_saw_it(
        sim_url: str, tmp_path: Path) -> None:
    """Every request it sent is still streaming (400 tokens each) when it is killed, so no record has told the
    parent its count: what the parent says it sent must still be what reached the server."""
    proc = _workers(tmp_path, sim_url, IN_FLIGHT)
    reports = tmp_path / "reports"
    pid, start_at = _started(reports, 1)
    ids = shard_ids(Shard(1, 2).run_id("in-flight", start_at), 0, 60, 1, 2)
    for _ in range(600):
        if len(arrived_at_sim(sim_url, ids)) >= 4:
            break
        time.sleep(0.05)
    time.sleep(0.17)  # between two sends (one each 100 ms) and away from the twice-a-second beat
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    loss = {s["index"]: s for s in json.loads((only_run_dir(reports) / "summary.json").read_text())[
        "run"]["shards"]}[1]["loss"]
    assert loss is not None, err
    assert loss["sent"] == len(arrived_at_sim(sim_url, ids)) >= 4, (loss, arrived_at_sim(sim_url, ids))
    assert loss["in_flight"] == loss["sent"] - loss["ended"] and loss["never_sent"] == 30 - loss["sent"]


LONG = """name: long
workload: {prompt_tokens: 16, output_tokens: 8}
phases:
  - {name: open, load: {type: constant, rate: 10, requests: 600}}
  - {name: never, load: {type: constant, rate: 10, requests: 10}}
"""


def test_ctrl_c_of_the_parent_stops_the_workers_and_merges_what_they_wrote(sim_url: str, tmp_path: Path) -> None:
    """As a terminal sends it: SIGINT to the parent's process group, which the workers are not in."""
    proc = _workers(tmp_path, sim_url, LONG)
    worker_pid(tmp_path / "reports", 1, 300)
    worker_pid(tmp_path / "reports", 0, 300)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_STOPPED, err
    assert "SIGINT: the workers stop sending" in err and "harness merge" in err
    assert "Traceback" not in err + out
    run_dir = only_run_dir(tmp_path / "reports")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["stopped"] == "SIGINT" and not summary["run"]["complete"]
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert all(s["loss"] is None and 0 < s["records"] < 300 for s in shards.values()), shards  # stopped, not dead
    assert [p["name"] for p in summary["phases"]] == ["open"]
    ok = summary["phases"][0]["requests"]["ok"]
    assert ok == shards[0]["records"] + shards[1]["records"]  # every request in flight at the stop finished
    assert len((run_dir / "requests.jsonl").read_text().splitlines()) == ok


THREE_USERS = """name: three
workload: {prompt_tokens: 16, output_tokens: 8}
phases:
  - {name: users, load: {type: concurrency, concurrency: 3, requests: 12}}
"""
IDLES = "phase users: 3 users over 4 {who}s: {who} 3 idles in it (nothing of the load is lost)"


def test_three_users_over_four_workers_is_complete_and_says_up_front_that_one_idles(sim_url: str,
                                                                                     tmp_path: Path) -> None:
    out, err = _workers(tmp_path, sim_url, THREE_USERS, workers=4).communicate(timeout=120)
    assert IDLES.format(who="worker") in out + err, out + err
    summary = json.loads((only_run_dir(tmp_path / "reports") / "summary.json").read_text())
    assert summary["run"]["complete"] and summary["run"]["not_run"] == []
    assert [s["records"] for s in sorted(summary["run"]["shards"], key=lambda s: s["index"])] == [4, 4, 4, 0]
    assert summary["phases"][0]["requests"]["ok"] == 12 and summary["phases"][0]["incomplete"] is None


def test_a_shard_by_hand_without_a_share_says_so_and_ends_complete(sim_url: str, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(THREE_USERS)
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(tmp_path / "s.yaml"), "--endpoint", sim_url,
                           "--shard", "3/4", "--start-at", repr(time.time() + LEAD_S), "--progress", "off",
                           "--reports-dir", str(tmp_path / "r")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert IDLES.format(who="shard") in done.stdout + done.stderr
    summary = json.loads((only_run_dir(tmp_path / "r") / "summary.json").read_text())
    assert summary["run"]["complete"] and summary["run"]["not_run"] == [] and summary["phases"] == []
    assert 0 < summary["run"]["shard"]["ready_s"] < 60  # launch to ready: the lead --start-at needs
