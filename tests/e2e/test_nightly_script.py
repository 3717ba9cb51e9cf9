"""docker/ci/nightly.sh as a CI system runs it (two repeats a night, to keep the suite short), three nights
against loopback simulators: the first starts the
history, the second compares clean (exit 0, JUnit and Markdown written), the third meets a slower server and
exits 99."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
name: tiny-nightly
seed: 5
workload: {prompt_tokens: 32, output_tokens: 16}
thresholds: {error_rate: "<1%"}
phases:
  - name: open
    load: {type: constant, rate: 40, requests: 24}
"""


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, str]]:
    procs, urls = [], {}
    for name, itl in (("usual", "10"), ("slower", "16")):
        proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--timing", "fixed",
                                 "--fixed-ttft-ms", "20", "--fixed-itl-ms", itl], stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        urls[name] = json.loads(proc.stdout.readline())["url"]
        procs.append(proc)
    yield urls
    for proc in procs:
        proc.terminate()
        proc.communicate(timeout=15)


def _night(tmp: Path, endpoint: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS": f"{sys.executable} -m harness", "HARNESS_SCENARIO": str(tmp / "tiny.yaml"),
           "HARNESS_OUT": str(tmp / "out"), "HARNESS_HISTORY": str(tmp / "history.sqlite"),
           "HARNESS_ENDPOINT": endpoint, "HARNESS_BASELINE": "2", "HARNESS_REPEAT": "2"}
    return subprocess.run(["bash", str(ROOT / "docker" / "ci" / "nightly.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_three_nights(tmp_path: Path, sims: dict[str, str]) -> None:
    (tmp_path / "tiny.yaml").write_text(SCENARIO)
    first = _night(tmp_path, sims["usual"])
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "this run starts the baseline" in (tmp_path / "out" / "compare.md").read_text()
    second = _night(tmp_path, sims["usual"])
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "no regression" in (tmp_path / "out" / "compare.md").read_text()
    assert ET.parse(tmp_path / "out" / "compare.junit.xml").getroot().get("failures") == "0"
    third = _night(tmp_path, sims["slower"])
    assert third.returncode == 99, third.stdout[-2000:] + third.stderr[-2000:]
    junit = ET.parse(tmp_path / "out" / "compare.junit.xml").getroot()
    assert "itl_p50" in [c.get("name") for c in junit if c.find("failure") is not None]
    shown = subprocess.run([sys.executable, "-m", "harness", "history", "show", "--db",
                            str(tmp_path / "history.sqlite")], capture_output=True, text=True, cwd=ROOT)
    assert len(shown.stdout.splitlines()) == 6  # three nights of two runs, each added
