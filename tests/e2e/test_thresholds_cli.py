"""Thresholds through the CLI, as a nightly job meets them: exit 0 when all hold, 99 naming the broken one,
2 before anything is sent when one is misspelt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import harness

SCENARIO = """
name: gate
workload: {prompt_tokens: 32, output_tokens: 8}
thresholds: {ttft_p99: "<5s", error_rate: "<1%"}
phases:
  - name: open
    load: {type: constant, rate: 20, requests: 10}
    thresholds: {output_tokens_per_s: "LIMIT"}
"""


@pytest.mark.parametrize(("limit", "code"), [(">1", 0), (">1000000", 99)])
def test_thresholds_pass_or_fail_the_run(tmp_path: Path, sim_url: str, limit: str, code: int) -> None:
    scenario = tmp_path / "gate.yaml"
    scenario.write_text(SCENARIO.replace("LIMIT", limit))
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == code, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    (phase,) = json.loads((run_dir / "summary.json").read_text())["phases"]
    results = {r["metric"]: r for r in phase["thresholds"]}
    assert set(results) == {"ttft_p99", "error_rate", "output_tokens_per_s"}
    rate = results["output_tokens_per_s"]
    assert rate["observed"] == phase["throughput"]["output_tokens_per_s"] and rate["unit"] == "/s"
    assert results["error_rate"]["observed"] == 0 and results["error_rate"]["passed"]
    assert "thresholds\n" in proc.stdout and f"output_tokens_per_s {limit}:" in proc.stdout
    if code == 99:
        assert not rate["passed"]
        assert proc.stderr.strip().endswith(f"error: 1 threshold broken: open output_tokens_per_s {limit}: "
                                            f"{rate['observed']:,.2f}/s")


def test_a_misspelt_threshold_exits_2_before_sending(tmp_path: Path) -> None:
    scenario = tmp_path / "gate.yaml"
    scenario.write_text(SCENARIO.replace("LIMIT", ">1").replace("ttft_p99", "ttft_p98"))
    proc = harness("run", str(scenario), "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: {scenario}: thresholds: 'ttft_p98': unknown metric; did you mean " \
                                  "ttft_p99, ttft_p95, ttft_p90? (see docs/scenarios.md for every field)"
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
