"""docker/ci/nightly.sh as a CI system runs it, night after night against loopback simulators, with one run a
night and with three:

- night 1 starts the baseline; nights 2–4 compare, their Markdown naming the baseline runs;
- night 5 meets a server ~20% slower per token and exits 99; its runs are flagged in the history;
- night 6 (the usual server) exits 0, compared with good nights, never night 5;
- a night with the harness starved of CPU (a busy loop pinned to its core) is not called a regression;
- every run folder is deleted, and night 7 still compares (the history alone is enough) and exits 0.

With one run a night, every night runs on a fresh "runner" (its own working folder) where only the history
file carries over, as the GitHub workflow's cache does; with three, one folder keeps the runs until night 7.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Tolerant client bounds: a shared CI machine's stalls must not make every night "untrusted"; the starved night
# below still checks that what is measured then is not called a regression.
SCENARIO = """
name: tiny-nightly
seed: 5
workload: {prompt_tokens: 32, output_tokens: 16}
client: {schedule_lag_bound_ms: 50, loop_lag_bound_ms: 50}
thresholds: {error_rate: "<1%"}
phases:
  - name: open
    load: {type: constant, rate: 80, requests: 48}
"""
CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def _pinned(cores: list[int]) -> list[str]:
    return ["taskset", "-c", ",".join(map(str, cores))] if len(CORES) >= 2 and shutil.which("taskset") else []


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, str]]:
    procs, urls = [], {}
    for name, itl in (("usual", "10"), ("slower", "12")):
        proc = subprocess.Popen([*_pinned(CORES[-1:]), sys.executable, "-m", "harness", "sim", "serve", "--port",
                                 "0", "--timing", "fixed", "--fixed-ttft-ms", "20", "--fixed-itl-ms", itl],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        urls[name] = json.loads(proc.stdout.readline())["url"]
        procs.append(proc)
    yield urls
    for proc in procs:
        proc.terminate()
        proc.communicate(timeout=15)


class Nights:
    def __init__(self, tmp: Path, repeat: int, fresh_runner: bool) -> None:
        self.tmp, self.repeat, self.fresh = tmp, repeat, fresh_runner
        self.history = tmp / "cache" / "history.sqlite"  # what survives between runners
        self.count = 0
        (tmp / "tiny.yaml").write_text(SCENARIO)

    def runner(self) -> Path:
        """The working folder of tonight's runner: a new one each night when runners are ephemeral."""
        return self.tmp / (f"runner-{self.count}" if self.fresh else "runner")

    def run(self, endpoint: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        self.count += 1
        work = self.runner()
        work.mkdir(exist_ok=True)
        env = {**os.environ, "HARNESS": f"{sys.executable} -m harness", "HARNESS_SCENARIO": str(self.tmp / "tiny.yaml"),
               "HARNESS_OUT": str(work / "nightly"), "HARNESS_HISTORY": str(self.history),
               "HARNESS_ENDPOINT": endpoint, "HARNESS_REPEAT": str(self.repeat)}
        return subprocess.run([*(prefix or []), "bash", str(ROOT / "docker" / "ci" / "nightly.sh")], cwd=work,
                              env=env, capture_output=True, text=True, timeout=300)

    def markdown(self) -> str:
        return (self.runner() / "nightly" / "compare.md").read_text()

    def junit(self) -> ET.Element:
        return ET.parse(self.runner() / "nightly" / "compare.junit.xml").getroot()

def _said(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout[-3000:] + proc.stderr[-3000:]


def _added(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The run ids the night added to the history, as it says so."""
    line = next(line for line in proc.stdout.splitlines() if line.startswith("added "))
    return set(line.rsplit(": ", 1)[1].split(", "))


def _baseline_ids(markdown: str) -> set[str]:
    line = next(line for line in markdown.splitlines() if line.startswith("Baseline "))
    return set(re.findall(r"\b[0-9a-f]{8}\b", line.split("; current")[0].split("(", 1)[-1]))


@pytest.mark.parametrize("repeat", [1, 3])
def test_seven_nights(tmp_path: Path, sims: dict[str, str], repeat: int) -> None:
    nights = Nights(tmp_path, repeat, fresh_runner=repeat == 1)
    first = nights.run(sims["usual"])
    assert first.returncode == 0, _said(first)
    assert "this run starts the baseline" in nights.markdown()
    good = {1: _added(first)}
    for night in (2, 3, 4):
        proc = nights.run(sims["usual"])
        assert proc.returncode == 0, _said(proc)
        md = nights.markdown()
        assert "no regression" in md and "| open | itl_p50 |" in md, md
        named = _baseline_ids(md)
        assert named and named <= {i for ids in good.values() for i in ids}, (named, good)
        good[night] = _added(proc)
    assert len(_baseline_ids(nights.markdown())) == 3  # HARNESS_BASELINE's default

    fifth = nights.run(sims["slower"])
    assert fifth.returncode == 99, _said(fifth)
    failed = [c.get("name") for c in nights.junit() if c.find("failure") is not None]
    assert "itl_p50" in failed, failed
    assert all(c.get("classname", "").startswith(("harness.compare.", "harness.thresholds.")) for c in nights.junit())
    bad = _added(fifth)
    assert len(bad) == repeat

    sixth = nights.run(sims["usual"])
    assert sixth.returncode == 0, _said(sixth)
    assert _baseline_ids(nights.markdown()) and not _baseline_ids(nights.markdown()) & bad

    shown = subprocess.run([sys.executable, "-m", "harness", "history", "show", "--db", str(nights.history)],
                           capture_output=True, text=True, cwd=ROOT)
    flagged = [line for line in shown.stdout.splitlines() if "flagged: regression" in line]
    assert {line.split()[3] for line in flagged} == bad and all(line.startswith("✗") for line in flagged)

    if _pinned(CORES):  # the harness shares its core with a busy loop; the simulators keep theirs
        hog = subprocess.Popen([*_pinned(CORES[:1]), sys.executable, "-c", "import time\nt = time.time()\n"
                                "while time.time() - t < 120: pass"])
        try:
            starved = nights.run(sims["usual"], prefix=_pinned(CORES[:1]))
        finally:
            hog.kill()
            hog.wait()
        assert starved.returncode in (0, 5), _said(starved)  # clean, or untrusted: never a regression

    for folder in tmp_path.glob("runner*"):
        shutil.rmtree(folder / "nightly")
    seventh = nights.run(sims["usual"])
    assert seventh.returncode == 0, _said(seventh)
    md = nights.markdown()
    assert "no regression" in md and _baseline_ids(md) and not _baseline_ids(md) & bad
