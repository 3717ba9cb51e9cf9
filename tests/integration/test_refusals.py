"""Configurations vLLM 0.33 refuses to start are refused here too, in one line and exit 2 — `harness predict` and
`harness run` on the bundled simulator alike — never silently made to fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import harness

PLAN = """name: plan
workload: {{prompt_tokens: 512, output_tokens: 32}}
simulator: {{{sim}}}
phases:
  - {{name: chat, load: {{type: poisson, rate: 1, requests: 4}}}}
"""


@pytest.mark.parametrize(("sim", "said"), [
    ("accelerator: h100-sxm, model: llama-3.1-70b",  # 141 GB of weights on one 80 GB GPU
     "llama-3.1-70b's weights (141 GB in bf16) do not fit 1 × h100-sxm"),
    ("accelerator: cerebras-cs3, model: llama-3.1-70b, tp: 2",  # two 44 GB systems
     "llama-3.1-70b's weights (141 GB in bf16) do not fit 2 × cerebras-cs3"),
    ("accelerator: h100-sxm, model: llama-3.1-70b, tp: 2",  # weights fit, a 128k-token request's KV does not
     "the model's max seq len (131,072) is larger than the maximum number of tokens that can be stored in KV cache "
     "(20,269)"),
])
@pytest.mark.parametrize("command", ["predict", "run"])
def test_a_configuration_vllm_would_not_start_is_refused(tmp_path: Path, sim: str, said: str, command: str) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN.format(sim=sim))
    done = harness(command, str(tmp_path / "plan.yaml"), *(["--reports-dir", str(tmp_path / "r")]
                                                             if command == "run" else []))
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_the_largest_max_model_len_vllm_suggests_then_starts(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN.format(
        sim="accelerator: h100-sxm, model: llama-3.1-70b, tp: 2, max_model_len: 20269"))
    done = harness("predict", str(tmp_path / "plan.yaml"))
    assert done.returncode == 0, done.stderr
