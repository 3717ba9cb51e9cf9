"""`harness run` as a user runs it: a real process, real files, the bundled simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from harness.scenario import load_scenario
from harness.sim.predict import predict

ROOT = Path(__file__).resolve().parent.parent

SMALL = """
name: small
seed: 1
workload: {prompt_tokens: 64, output_tokens: 16}
slo: {ttft_ms: 2000}
phases:
  - name: open
    load: {type: constant, rate: 20, requests: 10}
  - name: closed
    load: {type: concurrency, concurrency: 3, requests: 6}
"""


def harness(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=ROOT)


def only_run_dir(reports: Path) -> Path:
    (run_dir,) = list(reports.iterdir())
    return run_dir


def test_default_run_is_the_quickstart_and_shows_the_thesis(tmp_path: Path) -> None:
    proc = harness("run", "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for label in ("interactive", "training-batch", "TTFT p50/p90/p99 ms", "ITL", "TPOT", "E2E",
                  "output tokens/s", "goodput", "schedule lag p99"):
        assert label in proc.stdout
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schema"] == "harness.summary/1"
    interactive, batch = summary["phases"]
    # Training-style batches win on throughput; interactive arrivals win on time to first token.
    assert batch["throughput"]["output_tokens_per_s"] > 2 * interactive["throughput"]["output_tokens_per_s"]
    assert interactive["latency_ms"]["ttft"]["p50"] * 5 < batch["latency_ms"]["ttft"]["p50"]
    # Virtual time predicts the same run: the real one adds only HTTP and the simulator's noise.
    predicted = predict(load_scenario(ROOT / "scenarios" / "quickstart.yaml"))["phases"]
    for real, virtual in zip(summary["phases"], predicted, strict=True):
        for metric in ("output_tokens_per_s", "requests_per_s"):
            assert real["throughput"][metric] == pytest.approx(virtual["throughput"][metric], rel=0.1)
        # The mean, not the median: a batch's TTFTs fall on four prefill-chunk levels, and which level
        # holds the median flips with microseconds of send jitter.
        assert real["latency_ms"]["ttft"]["mean"] == pytest.approx(virtual["latency_ms"]["ttft"]["mean"], rel=0.15)
        assert real["latency_ms"]["tpot"]["p50"] == pytest.approx(virtual["latency_ms"]["tpot"]["p50"], rel=0.1)
    rows = pd.read_csv(run_dir / "requests.csv")
    assert len(rows) == 60 + 128 and set(rows["status"]) == {"ok"}
    assert (yaml.safe_load((run_dir / "scenario.yaml").read_text())["name"]) == "quickstart"


def test_run_against_an_endpoint_keeps_the_key_secret(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    secret = "sk-do-not-leak-1234567890"
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--api-key-env", "TEST_KEY", "--reports-dir",
                   str(tmp_path / "reports"), env={"TEST_KEY": secret})
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(tmp_path / "reports")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [p["requests"]["ok"] for p in summary["phases"]] == [10, 6]
    assert summary["run"]["endpoint"]["model"] == "llama-3.1-8b"  # discovered from /v1/models
    for path in run_dir.iterdir():
        assert secret not in path.read_text(), path.name
    assert secret not in proc.stdout + proc.stderr


def test_completions_api_and_failures_are_counted_by_cause(tmp_path: Path, sim_url: str) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--api", "completions", "--model", "no-such-model",
                   "--reports-dir", str(tmp_path / "reports"))
    assert proc.returncode == 0, proc.stderr  # a failing endpoint never crashes the run
    summary = json.loads((only_run_dir(tmp_path / "reports") / "summary.json").read_text())
    for phase in summary["phases"]:
        assert phase["requests"]["ok"] == 0
        assert phase["requests"]["failure_reasons"] == {"HTTP 404 not_found_error": phase["requests"]["total"]}
    assert "0 / 10" in proc.stdout
