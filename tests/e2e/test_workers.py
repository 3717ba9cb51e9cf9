"""`harness run --workers 2`: two processes, one shard each, merged; a worker killed mid-run is reported."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.config.scenario import load_scenario
from harness.run.distributed.sharding import LEAD_S
from harness.workload.plan import plan_phase
from harness.workload.shards import Shard
from tests.helpers import ROOT, WORKER_QUICK, arrived_at_sim, free_port, only_run_dir, shard_ids, worker_pid

pytestmark = pytest.mark.timing  # shards on one timeline: how close together processes send

QUICK = WORKER_QUICK




def quiet_enough(summary: dict) -> None:
    """Skip the rest of a test (its timing checks) where the harness said it could not keep up: a busy machine."""
    # Late sending is what these checks judge: a phase judged whole, or one whose sending lateness moved a figure
    # (from the intended send, or a rate); a tail of the gaps the client may have moved does not touch them.
    sending = ("ttft_from_intended", "e2e_from_intended", "requests_per_s", "output_tokens_per_s")
    late = [p["name"] for p in summary["phases"] if p["client_limited"] and (
        not p.get("client_limited_metrics") or any(m.startswith(sending) for m in p["client_limited_metrics"]))]
    if late:
        pytest.skip(f"client-limited in {', '.join(late)} (a busy machine): the timing checks need it to keep up")
    parent = summary["run"].get("coordinator") or {}
    if parent.get("verdict", "ok") != "ok":
        pytest.skip(f"the parent of the workers was late ({parent['verdict']}): barriers waited for it")


def scrape(port: int) -> dict[tuple[str, str], float]:
    """harness_requests_total by (phase, status), from the parent's live exporter."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "harness_requests_total":
                key = (sample.labels["phase"], sample.labels["status"])
                found[key] = found.get(key, 0.0) + sample.value
    return found


def test_two_workers_send_the_whole_schedule_once(sim_url: str, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, *QUICK, "--workers", "2",
                             "--reports-dir", str(tmp_path), "--metrics-port", str(port), "--metrics-hold", "60s"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # the merged run is written, then the exporter holds
            if list(tmp_path.glob("*/summary.json")) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1]
        # The parent exported what the workers streamed back: every request of both phases, once.
        assert scrape(port) == {("interactive", "ok"): 20.0, ("training-batch", "ok"): 8.0}
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [20, 8] and summary["run"]["complete"]
    shards = summary["run"]["shards"]
    assert [s["index"] for s in shards] == [0, 1] and sum(s["records"] for s in shards) == 28
    # The parent checked itself, as a worker does.
    assert summary["run"]["coordinator"]["verdict"] in ("ok", "stalled", "not_scheduled", "saturated")
    assert summary["run"]["coordinator"]["cpu_seconds"] > 0
    # Each worker measured its clock against the parent's (one host: no skew beyond the round trip).
    # (On one host the true offset is 0, and an NTP-style estimate is within its uncertainty of the truth.)
    assert all(abs(s["clock_offset_ms"]) <= s["clock_uncertainty_ms"] + 1 for s in shards), shards
    start_at = json.loads((Path(shards[0]["run_dir"]) / "summary.json").read_text())["run"]["shard"]["start_at"]
    scenario = load_scenario(run_dir / "scenario.yaml")
    run_id = Shard(0, 2).run_id(scenario.name, start_at)
    planned = {s.request_id for i in range(2) for s in plan_phase(scenario, i, run_id).specs}  # type: ignore[union-attr]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["request_id"] for r in records) == sorted(planned)  # each request of the one schedule, once
    # Both workers began on the common start, within the harness's own start-up jitter.
    starts = [min(r["intended_ns"] for r in records if int(r["request_id"].rsplit("-", 1)[1]) % 2 == i)
              for i in range(2)]
    assert abs(starts[0] - starts[1]) < 100_000_000, shards
    # Aligned by the parent's phase-0 barrier, so never called late however long each took to reach the common
    # start (3 of 6 runs said "started 178–1,148 ms late" when the start was judged before the barrier).
    assert all(s.get("late_ms") is None for s in shards), shards
    assert "after the common start" not in (run_dir / "table.txt").read_text()
    # One barrier across the workers: the second batch left (from both) after the last answer of the first
    # (answers of 4–64 tokens: without it the worker with the shorter answers would start early).
    batch = [r for r in records if r["batch"] is not None]
    first_end = max(r["end_ns"] for r in batch if r["batch"] == 0)
    assert {r["batch"] for r in batch} == {0, 1}
    assert min(r["intended_ns"] for r in batch if r["batch"] == 1) >= first_end - 1_000_000  # clocks: 1 ms
    # One timeline: no shard sent a request of the batch phase before every shard's last interactive answer
    # ended (without the phase barrier the phases overlapped by 70–372 ms), and batch 0 is released together
    # too (it left in halves 73–1,155 ms apart). Within 20 ms where every process kept up (measured 0.2–4.2 ms:
    # docs/load-engine.md).
    interactive_end = max(r["end_ns"] for r in records if r["phase"] == "interactive")
    assert min(r["sent_ns"] for r in batch) >= interactive_end - 1_000_000
    quiet_enough(summary)  # the spread of a batch's sends is timing: only where the workers kept up
    for b in (0, 1):
        sends = [r["sent_ns"] for r in batch if r["batch"] == b]
        assert max(sends) - min(sends) <= 20_000_000, (b, (max(sends) - min(sends)) / 1e6)


def in_flight(records: list[dict]) -> float:
    """Time-weighted requests in flight between the phase's first send and its last end."""
    events = sorted([(r["sent_ns"], 1) for r in records] + [(r["end_ns"], -1) for r in records])
    area, level, last = 0.0, 0, events[0][0]
    for t, step in events:
        area += level * (t - last)
        level, last = level + step, t
    return area / (events[-1][0] - events[0][0])


def test_closed_loop_users_split_so_the_concurrency_holds(sim_url: str, tmp_path: Path) -> None:
    """3 users over 2 workers: 2 + 1 users with their share of requests each, so 3 stay in flight throughout
    (a 12 + 12 split of requests left one worker with a single user for most of the phase)."""
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--concurrency", "3",
                           "--requests", "24", "--output-tokens", "32", "--progress", "off", "--workers", "2",
                           "--reports-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path)
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 24
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {s["index"]: s["records"] for s in summary["run"]["shards"]} == {0: 16, 1: 8}
    quiet_enough(summary)  # in flight over time is timing: only where the workers kept up
    assert in_flight(records) >= 2.7


def test_a_worker_killed_mid_run_is_named_and_the_rest_kept(sim_url: str, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "8",
                             "--requests", "40", "--output-tokens", "8", "--progress", "lines", "--workers", "2",
                             "--reports-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.kill(worker_pid(tmp_path, 1, 200), signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, out + err
    assert "worker 1 died (exit -9) in phase interactive" in err and "in flight lost" in err and "never sent" in err
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert not summary["run"]["complete"] and summary["run"]["stopped"] is None
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[1]["stopped"] == "worker died (exit -9)" and not shards[1]["complete"]
    assert shards[0]["records"] == 20 and 0 < shards[1]["records"] < 20  # shard 0's share whole, 1's cut short
    assert summary["phases"][0]["requests"]["ok"] == shards[0]["records"] + shards[1]["records"]
    # Loss accounting in the results: sent = ended + in flight; a request in flight is not "never sent".
    loss = shards[1]["loss"]
    assert loss["phase"] == "interactive" and loss["ended"] == shards[1]["records"]
    assert loss["sent"] == loss["ended"] + loss["in_flight"] and loss["sent"] + loss["never_sent"] == 20
    # … and exact against the server's own count: each send was said to the parent before it left (a beat a
    # second made it up to a second stale).
    assert len(arrived_at_sim(sim_url, shard_ids(summary["run"]["run_id"], 0, 40, 1, 2))) == loss["sent"]
    assert shards[0]["loss"] is None
    assert summary["phases"][0]["incomplete"] == "shard 1/2 died in it"  # the phase itself says it is not whole
    table = (only_run_dir(tmp_path) / "table.txt").read_text()
    assert f"shard 1/2 worker died (exit -9) in phase interactive: of {loss['sent']} sent" in table
    assert "in flight (lost)" in (only_run_dir(tmp_path) / "report.html").read_text()


def test_a_shard_that_starts_late_is_named_in_its_run_and_the_merge(sim_url: str, tmp_path: Path) -> None:
    """Two shards by hand on one --start-at; the second launched a second after it (--late-ok): it says so, and
    `harness merge` names it with its lateness in the merged summary and table."""
    start_at = round(time.time() + LEAD_S, 3)
    common = [sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "10", "--requests", "8",
              "--output-tokens", "8", "--progress", "off", "--start-at", repr(start_at)]
    first = subprocess.Popen([*common, "--shard", "0/2", "--reports-dir", str(tmp_path / "s0")], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(max(0.0, start_at + 1.0 - time.time()))
    refused = subprocess.run([*common, "--shard", "1/2", "--reports-dir", str(tmp_path / "no")], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "s in the past" in refused.stderr and "--late-ok" in refused.stderr
    late = subprocess.run([*common, "--shard", "1/2", "--late-ok", "--reports-dir", str(tmp_path / "s1")], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0 and "after the common start" not in err, err
    assert late.returncode == 0 and "shard 1/2 started" in late.stderr and "after the common start" in late.stderr
    merged = subprocess.run([sys.executable, "-m", "harness", "merge", str(only_run_dir(tmp_path / "s0")),
                             str(only_run_dir(tmp_path / "s1")), "--out", str(tmp_path / "merged")], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert merged.returncode == 0, merged.stderr
    shards = json.loads((tmp_path / "merged" / "summary.json").read_text())["run"]["shards"]
    assert shards[0]["late_ms"] < 50 and shards[1]["late_ms"] > 900
    said = merged.stdout + merged.stderr + (tmp_path / "merged" / "table.txt").read_text()
    assert "shard 1/2 started" in said and "after the common start" in said


def test_a_worker_frozen_for_3_s_is_named_and_the_lateness_is_put_down_to_it(sim_url: str, tmp_path: Path) -> None:
    """SIGSTOP on a worker for 3 s: the parent names it (its beats stopped) within 3 s of the stop, says when it
    speaks again, keeps its silence per phase, and the merged phase puts its lateness down to the frozen worker,
    not to "the server on the same machine"; after SIGCONT the run completes."""
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", sim_url, "--rate", "8",
                             "--requests", "40", "--output-tokens", "8", "--progress", "lines", "--workers", "2",
                             "--reports-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    said: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: said.extend((time.monotonic(), line) for line in proc.stderr or []))
    reader.start()
    pid = worker_pid(tmp_path, 1, 300)
    time.sleep(1.0)  # in its phase, sending
    os.kill(pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    time.sleep(3)
    os.kill(pid, signal.SIGCONT)
    proc.wait(timeout=120)
    reader.join(timeout=10)
    assert proc.stderr is not None
    proc.stderr.close()
    named = [t for t, line in said if "worker 1 has said nothing" in line]
    assert named and named[0] - stopped_at < 3, said
    assert any("worker 1 speaks again" in line for _, line in said)
    summary = json.loads((only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["run"]["complete"]
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[1]["silent_max_s"] >= 2.0 and shards[0]["silent_max_s"] is None
    (phase,) = summary["phases"]
    assert shards[1]["silences"][phase["name"]] >= 2.0 and shards[0]["silences"] is None
    assert phase["client_limited"], phase["client_limited_reason"]  # its loop stood still for 3 s
    assert phase["client_limited_reason"].startswith("worker 1 was frozen for")
    assert "the server on the same machine" not in phase["client_limited_reason"]
    assert "shard 1/2 said nothing for" in (only_run_dir(tmp_path) / "table.txt").read_text()


TIMELINE = {"name": "timeline", "seed": 3,
            "workload": {"prompt_tokens": 32, "output_tokens": {"dist": "uniform", "min": 4, "max": 48}},
            "phases": [{"name": "open", "load": {"type": "poisson", "rate": 20, "requests": 16}},
                       {"name": "users", "load": {"type": "concurrency", "concurrency": 3, "duration_s": 1.5}},
                       {"name": "again", "load": {"type": "constant", "rate": 10, "requests": 8}},
                       {"name": "batches", "load": {"type": "batch", "size": 6, "batches": 2}}]}


def test_shards_by_hand_keep_one_timeline(sim_url: str, tmp_path: Path) -> None:
    """Two shards started by hand, nobody to hold a barrier: each phase starts on both at its planned time (the
    previous schedule plus --phase-slack), so no phase's first send precedes any shard's last answer of the phase
    before, and a fixed-batch phase's first batch leaves from both together. A shard that could not keep the plan
    would have said so in that phase's warnings."""
    scenario = tmp_path / "timeline.yaml"
    scenario.write_text(json.dumps(TIMELINE))
    start_at = round(time.time() + LEAD_S, 3)
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                               "--progress", "off", "--start-at", repr(start_at), "--shard", f"{i}/2",
                               "--phase-slack", "1s", "--reports-dir", str(tmp_path / f"s{i}")], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert all("phase batches: shards by hand release each phase's first batch together" in e for e in errs)
    merged = subprocess.run([sys.executable, "-m", "harness", "merge", *(str(only_run_dir(tmp_path / f"s{i}"))
                             for i in range(2)), "--out", str(tmp_path / "merged")], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert merged.returncode == 0, merged.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    records = [json.loads(line) for line in (tmp_path / "merged" / "requests.jsonl").read_text().splitlines()]
    assert [s["phase_slack_s"] for s in summary["run"]["shards"]] == [1.0, 1.0]
    assert all(set(s["phase_late_ms"]) == {"users", "again", "batches"} for s in summary["run"]["shards"])
    names = [p["name"] for p in TIMELINE["phases"]]
    for before, phase in itertools.pairwise(names):
        ended = max(r["end_ns"] for r in records if r["phase"] == before)
        first = min(r["sent_ns"] for r in records if r["phase"] == phase)
        named = [w for p in summary["phases"] if p["name"] == phase for w in p["warnings"]]
        assert first >= ended or any("after its planned start" in w for w in named), (phase, (ended - first) / 1e6)
    quiet_enough(summary)  # how close together two processes send is timing: only where both kept up
    sends = [r["sent_ns"] for r in records if r["phase"] == "batches" and r["batch"] == 0]
    assert len(sends) == 6 and max(sends) - min(sends) < 20_000_000, (max(sends) - min(sends)) / 1e6
