"""Shards by hand (`--shard i/N --start-at T`, no parent) as things go wrong, with real processes and real signals:
what `harness merge` then says must be as exact as the timeline. A shard that began 3 s late has its phase marked
incomplete, and no batch-versus-interactive ratio rests on it; so has one whose clock is 300 ms behind (measured
against `harness clock` with --clock-ref, its records moved); a shard killed with SIGKILL mid-phase has the phase
it died in (and those after) incomplete, its loss counted from its records against its plan.

No clock is judged closely: 3 s of lateness and 300 ms of skew against a 0.25 s bound, a kill at a known point of
a 4 s phase."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.errors import EXIT_HARNESS
from tests.helpers import ROOT, serving

TWO_PHASES = """name: byhand
workload: {prompt_tokens: 16, output_tokens: 8}
phases:
  - {name: interactive, load: {type: constant, rate: 10, requests: 40}}
  - {name: batch, load: {type: batch, size: 8, batches: 2}}
"""


def _shard(scenario: Path, sim_url: str, index: int, start_at: float, reports: Path, *extra: str,
           prefix: tuple[str, ...] = (), env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*prefix, sys.executable, "-m", "harness", "run", str(scenario), "--endpoint", sim_url,
                             *extra,
                             "--shard", f"{index}/2", "--start-at", repr(start_at), "--late-ok", "--progress", "off",
                             "--phase-slack", "8s",  # the late shard's share of phase 1 ends well before phase 2
                             "--reports-dir", str(reports)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _merge(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    dirs = [str(d) for i in (0, 1) for d in (tmp_path / f"s{i}").iterdir()]
    done = subprocess.run([sys.executable, "-m", "harness", "merge", *dirs, "--out", str(tmp_path / "merged")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    return done, json.loads((tmp_path / "merged" / "summary.json").read_text())


def test_a_shard_3_s_late_marks_its_phase_and_the_conclusion_says_why(sim_url: str, tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TWO_PHASES)
    start_at = time.time() + 6
    first = _shard(scenario, sim_url, 0, start_at, tmp_path / "s0")
    time.sleep(max(0.0, start_at + 3 - time.time()))
    late = _shard(scenario, sim_url, 1, start_at, tmp_path / "s1")
    for proc in (first, late):
        proc.communicate(timeout=120)
    assert late.returncode == 0 and first.returncode == 0
    done, summary = _merge(tmp_path)
    assert done.returncode == 0, done.stderr
    phases = {p["name"]: p for p in summary["phases"]}
    said = re.fullmatch(r"shard 1/2 began it ([\d.]+) s late: its share of the load was sent late",
                        phases["interactive"]["incomplete"] or "")
    assert said is not None and float(said[1]) >= 3.0, phases["interactive"]["incomplete"]  # 3 s and its start-up
    assert phases["batch"]["incomplete"] is None  # the planned timetable held it: it began on time
    assert "warning: phase interactive is incomplete: shard 1/2 began it" in done.stderr
    assert not summary["run"]["complete"]
    assert summary["comparison"]["phases"] == []  # no ratio rests on the distorted phase …
    (said,) = summary["comparison"]["conclusion"]  # … and the conclusion says why
    assert said.startswith("No ratio of batch to interactive: interactive is incomplete (shard 1/2 began it")


def test_a_shard_killed_mid_phase_leaves_that_phase_incomplete_with_its_loss_counted(sim_url: str,
                                                                                     tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TWO_PHASES)
    start_at = time.time() + 6
    procs = [_shard(scenario, sim_url, i, start_at, tmp_path / f"s{i}") for i in (0, 1)]
    time.sleep(max(0.0, start_at + 2 - time.time()))  # about half way through its 20 requests of 40 at 10/s
    os.kill(procs[1].pid, signal.SIGKILL)
    for proc in procs:
        proc.communicate(timeout=120)
    assert procs[1].returncode == -signal.SIGKILL
    done, summary = _merge(tmp_path)
    assert done.returncode == EXIT_HARNESS and "shard 1" in done.stderr, done.stderr
    phases = {p["name"]: p for p in summary["phases"]}
    assert phases["interactive"]["incomplete"] == "shard 1/2 died in it"
    assert phases["batch"]["incomplete"] == "shard 1/2 died in phase interactive, before it"
    loss = {s["index"]: s for s in summary["run"]["shards"]}[1]["loss"]
    assert loss["phase"] == "interactive" and 0 < loss["ended"] < 20
    assert loss["never_sent"] == 20 + 8 - loss["ended"]  # its share of both phases, less what it recorded
    assert sum(p["requests"]["total"] for p in summary["phases"]) == 20 + 8 + loss["ended"]  # shard 0's all there


@pytest.fixture
def clock_ref() -> Iterator[str]:
    with serving("clock", "--host", "127.0.0.1", "--port", "0") as url:
        yield url


@pytest.mark.skipif(shutil.which("faketime") is None, reason="needs Debian's faketime (make test installs it)")
def test_a_shard_whose_clock_is_300_ms_behind_is_measured_moved_and_its_phases_marked(
        sim_url: str, clock_ref: str, tmp_path: Path) -> None:
    """Shard 1 runs with its wall clock 300 ms behind (libfaketime; its monotonic clock untouched): on time by its
    clock, 300 ms late on everyone else's. Both measure their clocks against `harness clock`; the merge moves shard
    1's records onto the reference clock — its first batch then leaves ~300 ms after shard 0's, as it did — and
    marks both phases, so no conclusion rests on them."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TWO_PHASES)
    start_at = time.time() + 6
    skewed = {**os.environ, "FAKETIME": "-0.3", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    procs = [_shard(scenario, sim_url, 0, start_at, tmp_path / "s0", "--clock-ref", clock_ref),
             _shard(scenario, sim_url, 1, start_at, tmp_path / "s1", "--clock-ref", clock_ref,
                    prefix=("faketime", "-f", "-0.3"), env=skewed)]
    said = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], said
    skew = r"shard 1/2: this host's clock is \+(2[6-9]\d|3[0-4]\d)\.\d ms \(±[\d.]+\) off the reference's"
    assert re.search(skew, said[1][1]), said[1][1]
    done, summary = _merge(tmp_path)
    assert done.returncode == 0, done.stderr
    shards = {s["index"]: s for s in summary["run"]["shards"]}
    assert shards[1]["clock_offset_ms"] == pytest.approx(300, abs=40), shards[1]  # measured, ± the loopback trip
    assert abs(shards[0]["clock_offset_ms"]) < 40
    phases = {p["name"]: p for p in summary["phases"]}
    for name in ("interactive", "batch"):
        marked = re.fullmatch(r"shard 1/2 began it ([\d.]+) s late \(its clock \+(\d+) ms off the reference's\): "
                            r"its share of the load was sent late", phases[name]["incomplete"] or "")
        assert marked is not None, phases[name]
        # At least the skew; more when a busy machine also held its own start of the phase (seen: 0.8 s under -n 3).
        assert float(marked[1]) >= 0.2 and 260 <= int(marked[2]) <= 340, marked[0]
    records = [json.loads(line) for line in (tmp_path / "merged" / "requests.jsonl").read_text().splitlines()]
    first = [r["sent_ns"] for r in records if r["batch"] == 0]
    assert (max(first) - min(first)) / 1e6 > 200  # the true spread of batch 0, no longer hidden by the clocks
    assert summary["comparison"]["phases"] == [] and summary["comparison"]["conclusion"][0].startswith("No ratio")
