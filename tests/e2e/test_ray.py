"""`harness run --ray ADDRESS --workers 2`: one shard a Ray actor on a real local Ray head, merged; an actor
killed mid-run is reported and the other shard's records kept.

The head is `ray start --head` on this machine (no dashboard, a 100 MB object store, two CPUs). Ray maps a
loopback `--node-ip-address` to the host's own interface address for its control plane (`ray/_private/
services.py`, `resolve_ip_for_localhost`): that traffic stays on this host. The load goes to the simulator
on 127.0.0.1. Skipped, with the reason, where Ray is not installed (it is an optional extra; `make test`
installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, arrived_at_sim, free_port, harness, only_run_dir, shard_ids
from tests.helpers import WORKER_QUICK as QUICK

pytestmark = pytest.mark.timing  # shards on Ray actors on one timeline

pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'harness[ray]'); `make test` installs it")


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray is not None
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    started = subprocess.run([ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                              "--num-cpus", "2", "--include-dashboard", "false", "--object-store-memory",
                              "100000000", "--disable-usage-stats"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=60)


def test_two_ray_actors_send_the_whole_schedule_once(ray_head: str, sim_url: str, tmp_path: Path) -> None:
    proc = harness("run", "--endpoint", sim_url, *QUICK, "--workers", "2", "--ray", ray_head,
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 Ray actors" in proc.stderr
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [20, 8] and summary["run"]["complete"]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)) == 28
    # Each shard's index took every other request: shard i sent the ids ending in i mod 2.
    shards = summary["run"]["shards"]
    assert [s["records"] for s in shards] == [14, 14]
    for shard in shards:  # the streamed records and the fetched summary make each a shard on this host
        local = Path(shard["run_dir"])
        assert (local / "summary.json").is_file() and (local / "requests.jsonl").is_file()
        mine = {json.loads(line)["request_id"] for line in (local / "requests.jsonl").read_text().splitlines()}
        assert {int(i.rsplit("-", 1)[1]) % 2 for i in mine} == {shard["index"]}
    batch = [r for r in records if r["batch"] is not None]
    first_end = max(r["end_ns"] for r in batch if r["batch"] == 0)
    assert min(r["intended_ns"] for r in batch if r["batch"] == 1) >= first_end - 1_000_000  # one barrier
    # … answered as soon as the last shard reached it, not at the driver's next poll (it polled every 50 ms; the
    # gap was 18–71 ms): the driver's call to each actor returns the moment the worker writes a line.
    gap_ms = (min(r["intended_ns"] for r in batch if r["batch"] == 1) - first_end) / 1e6
    assert gap_ms < 30, gap_ms
    # One timeline over Ray too: the batch phase began after every interactive answer, batch 0 released together.
    interactive_end = max(r["end_ns"] for r in records if r["phase"] == "interactive")
    assert min(r["sent_ns"] for r in batch) >= interactive_end - 1_000_000
    # Where each actor keeps its records on its node is said at the start and kept in the summary; clocks measured.
    for shard in shards:  # each worker's log kept in the run folder once its actor is gone
        assert "records → " in (run_dir / "workers" / f"{shard['index']}.log").read_text()  # its plan lines
        host, _, path = shard["records_at"].partition(":")
        assert host and "/harness-shard-" in path and f"writes its records at {shard['records_at']}" in proc.stderr
        assert abs(shard["clock_offset_ms"]) <= shard["clock_uncertainty_ms"] + 1  # one host: the truth is 0


def test_an_actor_lost_mid_run_is_reported_and_the_other_shard_kept(ray_head: str, sim_url: str,
                                                                    tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "8",
                             "--requests", "24", "--output-tokens", "8", "--progress", "lines", "--workers", "2",
                             "--ray", ray_head, "--reports-dir", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = None
    for _ in range(600):
        found = list(tmp_path.glob("*/workers/pids"))
        if found and found[0].read_text():
            pids = {line.split()[0]: int(line.split()[1]) for line in found[0].read_text().splitlines()}
            break
        time.sleep(0.1)
    assert pids is not None, "the actors were never placed"
    time.sleep(5.0)  # the common start is 3.5 s after placement; 24 requests at 8/s take 3 s: kill mid-run
    os.kill(pids["1"], signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "worker 1 died (Ray actor lost" in err and "finished records kept" in err and "never sent" in err
    assert "/worker.log" in err  # where the lost worker's log stays: on the actor's node
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert not summary["run"]["complete"]
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[0]["records"] == 12 and shards[0]["complete"]  # the other shard's share, whole
    assert shards[1]["stopped"].startswith("worker died (Ray actor lost") and 0 < shards[1]["records"] < 12
    assert summary["phases"][0]["requests"]["ok"] == shards[0]["records"] + shards[1]["records"]
    # What it had sent is what the server saw: each send said as it went, taken by a call the driver keeps open.
    loss = shards[1]["loss"]
    assert loss["sent"] == len(arrived_at_sim(sim_url, shard_ids(summary["run"]["run_id"], 0, 24, 1, 2))), loss
