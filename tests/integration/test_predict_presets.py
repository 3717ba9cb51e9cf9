"""`harness predict --presets F`: a scenario that names no accelerator runs on the one the file brings (a fitted
twin), and one that names another says which ran — never silently the default."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import harness

TWIN = """accelerators:
  twin: {kind: fitted, step_ms: 4.05, weights_ms: 4.22, per_ktoken_ms: 58.78, per_seq_ms: 0.004,
         per_context_ktoken_ms: 0.048, kv_tokens: 24231, request_ms: 1.85}
"""
PLAN = """name: plan
workload: {prompt_tokens: 256, output_tokens: 64}
%s
phases:
  - {name: chat, load: {type: poisson, rate: 4, requests: 40}}
"""


def test_predict_runs_on_the_twin_a_presets_file_brings_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "twin.yaml").write_text(TWIN)
    (tmp_path / "plain.yaml").write_text(PLAN % "")
    (tmp_path / "named.yaml").write_text(PLAN % "simulator: {accelerator: h200}")
    plain = harness("predict", str(tmp_path / "plain.yaml"), "--presets", str(tmp_path / "twin.yaml"))
    assert plain.returncode == 0, plain.stderr
    assert "simulating twin from" in plain.stderr and "predicted in virtual time on twin," in plain.stdout
    named = harness("predict", str(tmp_path / "named.yaml"), "--presets", str(tmp_path / "twin.yaml"))
    assert named.returncode == 0, named.stderr
    assert "simulating h200 (the scenario's simulator.accelerator), not twin" in named.stderr
    assert "predicted in virtual time on h200," in named.stdout
