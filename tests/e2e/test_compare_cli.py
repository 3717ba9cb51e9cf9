"""`harness compare` as a nightly job runs it: real runs on the bundled simulator, exit 0 / 99 / 2."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import harness

pytestmark = [pytest.mark.timing, pytest.mark.pairs]  # two runs' latencies compared for a regression

# Tolerant client bounds: on a busy machine a run whose client was late is "untrusted" (exit 5) by design; these
# tests are about the comparison itself (the nightly test checks a starved night).
SCENARIO = """
name: nightly-mini
seed: 3
workload: {prompt_tokens: 32, output_tokens: 16}
client: {schedule_lag_bound_ms: 50, loop_lag_bound_ms: 50}
phases:
  - name: open
    load: {type: constant, rate: 40, requests: 60}
"""


def _run(tmp: Path, name: str, url: str, workload: str = "") -> Path:
    scenario = tmp / f"{name}.yaml"
    scenario.write_text(SCENARIO.replace("output_tokens: 16", workload) if workload else SCENARIO)
    proc = harness("run", str(scenario), "--endpoint", url, "--reports-dir", str(tmp / name), "--progress", "off")
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp / name).iterdir()
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Runs against two loopback simulators in fixed timing: the usual one, and one 50% slower per token."""
    tmp = tmp_path_factory.mktemp("compare")
    procs, urls = [], []
    for itl in ("10", "15"):
        proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0", "--timing", "fixed",
                                 "--fixed-ttft-ms", "20", "--fixed-itl-ms", itl], stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        urls.append(json.loads(proc.stdout.readline())["url"])
        procs.append(proc)
    try:
        yield {"base": _run(tmp, "base", urls[0]), "again": _run(tmp, "again", urls[0]),
               "slower": _run(tmp, "slower", urls[1]), "other": _run(tmp, "other", urls[0], "output_tokens: 24")}
    finally:
        for proc in procs:
            proc.terminate()
            proc.communicate(timeout=15)


def test_the_same_setup_passes(runs: dict[str, Path], tmp_path: Path) -> None:
    proc = harness("compare", str(runs["base"]), str(runs["again"]), "--junit", str(tmp_path / "j.xml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 60 requests of 16 tokens: their p99s rest on too few samples beyond them to vote, and say so.
    assert "no regression in 6 judged comparisons of 9" in proc.stdout
    assert "inconclusive: open ttft_p99: a p99 of 60 samples (it needs 1,000" in proc.stdout
    # Both sides are named under the table.
    assert f"baseline: `{runs['base']}` (1 run: " in proc.stdout
    assert f"current: `{runs['again']}` (1 run: " in proc.stdout
    assert ET.parse(tmp_path / "j.xml").getroot().get("failures") == "0"


def test_a_slower_decode_exits_99_and_says_where(runs: dict[str, Path], tmp_path: Path) -> None:
    proc = harness("compare", str(runs["base"]), str(runs["slower"]), "--markdown", str(tmp_path / "c.md"),
                   "--junit", str(tmp_path / "j.xml"))
    assert proc.returncode == 99, proc.stdout + proc.stderr
    assert "open   itl_p50" in proc.stdout and "✗ regression" in proc.stdout
    assert "regression" in (tmp_path / "c.md").read_text().splitlines()[0]
    failed = [c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot() if c.find("failure") is not None]
    assert "itl_p50" in failed and "tpot_p50" in failed
    # A wider tolerance than the change: no longer a regression.
    loose = harness("compare", str(runs["base"]), str(runs["slower"]), "--tolerance",
                    "itl_p50=80%,itl_p99=80%,tpot_p50=80%,e2e_p50=80%,e2e_p99=80%,ttft_p99=80%,ttft_p50=80%")
    # (5 where a figure was untrusted: the fixed 10 ms gaps' p99 measured 1 ms high by a client waiting for its CPU)
    assert loose.returncode in (0, 5) and "no regression" in loose.stdout, loose.stdout


def test_different_workloads_are_refused_unless_forced(runs: dict[str, Path]) -> None:
    proc = harness("compare", str(runs["base"]), str(runs["other"]))
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: not comparable: workload differs between {runs['base']} and "
                                   f"{runs['other']} (--force to compare anyway)")
    forced = harness("compare", str(runs["base"]), str(runs["other"]), "--force")
    assert forced.returncode in (0, 99) and "open" in forced.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["--tolerance", "ttft_p98=10%"], "'ttft_p98': not a compared metric"),
    (["--tolerance", "ttft_p99"], "give METRIC=LIMIT"),
    (["--tolerance", "ttft_p99=lots"], "'lots' is not a share"),
])
def test_bad_tolerances_name_the_flag(runs: dict[str, Path], args: list[str], words: str) -> None:
    proc = harness("compare", str(runs["base"]), str(runs["again"]), *args)
    assert proc.returncode == 2 and "--tolerance" in proc.stderr and words in proc.stderr


def test_a_directory_that_holds_no_run_is_bad_input(tmp_path: Path, runs: dict[str, Path]) -> None:
    proc = harness("compare", str(tmp_path), str(runs["base"]))
    assert proc.returncode == 2 and "neither a run directory" in proc.stderr


def test_repeats_run_with_fresh_seeds_into_one_folder_and_compare_run_level(tmp_path: Path) -> None:
    import yaml

    proc = harness("run", "--rate", "40", "--requests", "12", "--output-tokens", "8", "--repeat", "3",
                   "--reports-dir", str(tmp_path), "--progress", "off")
    assert proc.returncode == 0, proc.stderr
    (parent,) = tmp_path.iterdir()
    assert parent.name.endswith("-quick-x3") and sorted(p.name for p in parent.iterdir()) == [
        "repeats.json", "repeats.txt", "run-1", "run-2", "run-3"]
    seeds = [yaml.safe_load((parent / f"run-{k}" / "scenario.yaml").read_text())["seed"] for k in (1, 2, 3)]
    assert seeds[0] == 0 and len(set(seeds)) == 3
    repeats = json.loads((parent / "repeats.json").read_text())
    ttft = repeats["phases"]["interactive"]["ttft_p50"]
    runs = [json.loads((parent / f"run-{k}" / "summary.json").read_text())["phases"][0] for k in (1, 2, 3)]
    assert ttft["values"] == [r["latency_ms"]["ttft"]["p50"] for r in runs]
    assert ttft["low"] < ttft["mean"] == sum(ttft["values"]) / 3 < ttft["high"]
    assert "across 3 runs: mean [95% interval]" in proc.stdout
    same = harness("compare", str(parent), str(parent))
    # The same runs on both sides never regress. A client that was late (a busy machine) leaves the figures it
    # could have moved untrusted, one by one; only when that is every figure is there no verdict (exit 5).
    limited = any(r["client_limited"] for r in runs)
    assert "Welch t over runs (3 vs 3)" in same.stdout
    assert same.returncode == 0 or (limited and same.returncode == 5), same.stdout


def test_the_baseline_can_come_from_the_history(runs: dict[str, Path], tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    for name in ("base", "again"):
        assert harness("history", "add", str(runs[name]), "--db", str(db)).returncode == 0
    proc = harness("compare", "--baseline-from-history", "2", "--db", str(db), str(runs["slower"]))
    assert proc.returncode == 99, proc.stdout + proc.stderr
    assert "block bootstrap" in proc.stdout and "itl_p50" in proc.stdout
    # The history alone is enough: the same comparison with the baseline folders gone, figure for figure.
    chosen = next(runs[n] for n in ("again", "base")  # the last good run added (one the client limited is none)
                  if json.loads((runs[n] / "summary.json").read_text())["run"]["run_id"] in proc.stdout.split(
                      "baseline:")[1].splitlines()[0])
    from_folders = harness("compare", str(chosen), str(runs["slower"]))
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("base", "again"):
        runs[name].rename(moved / name)
    try:
        alone = harness("compare", "--baseline-from-history", "1", "--db", str(db), str(runs["slower"]))
    finally:
        for name in ("base", "again"):
            (moved / name).rename(runs[name])
    assert alone.returncode == 99, alone.stdout + alone.stderr
    table = [line for line in alone.stdout.splitlines() if line.startswith("open ")]
    assert table and table == [line for line in from_folders.stdout.splitlines() if line.startswith("open ")]
    wrong = harness("compare", "--baseline-from-history", "2", str(runs["base"]), str(runs["slower"]))
    assert wrong.returncode == 2
    assert "give BASELINE and CURRENT, or --baseline-from-history N and CURRENT" in wrong.stderr
