"""Prompts of exact length for a real tokenizer, from a local file (a tiny one is trained here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config.scenario import load_scenario
from harness.errors import TokenizerError
from harness.workload.plan import OpenLoopPlan, plan_phase, text_maker
from harness.workload.tokenizer import HFPromptMaker, train_demo_tokenizer
from tests.helpers import harness

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_demo_tokenizer(tmp_path_factory.mktemp("tok"), vocab_size=500)


@pytest.fixture(scope="module")
def unsplit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Merges across spaces: windows of the corpus do not re-encode to themselves."""
    return train_demo_tokenizer(tmp_path_factory.mktemp("tok"), vocab_size=500, pre_split=False)


@pytest.mark.parametrize("n", [1, 7, 100, 2000, 30_000])
def test_prompts_count_exactly_as_asked_by_that_tokenizer(tokenizer_dir: Path, n: int) -> None:
    maker = HFPromptMaker(tokenizer_dir)
    assert maker.windows_exact  # word starts hold: one decode a prompt, no second encode
    text = maker(n, seed=5)
    assert maker.count(text) == n
    assert text == maker(n, seed=5) and text != maker(n, seed=6)


@pytest.mark.parametrize("n", [1, 7, 100, 2000])
def test_a_tokenizer_that_merges_across_words_gets_every_prompt_verified(unsplit_dir: Path, n: int) -> None:
    maker = HFPromptMaker(unsplit_dir)
    assert not maker.windows_exact
    assert maker.count(maker(n, seed=5)) == n


def test_prompts_differ_from_their_first_tokens(tokenizer_dir: Path) -> None:
    """A unique lead: no prefix cache meets one prompt's first block in another."""
    maker = HFPromptMaker(tokenizer_dir)
    heads = {tuple(maker.tokenizer.encode(maker(300, seed)).ids[:4]) for seed in range(200)}
    assert len(heads) == 200


def test_scenario_tokenizer_shapes_the_prompts(tokenizer_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: t\nworkload: {{prompt_tokens: 300, tokenizer: {tokenizer_dir}}}\n"
                    "phases:\n  - name: p\n    load: {type: constant, rate: 1, requests: 3}\n")
    scenario = load_scenario(path)
    maker = text_maker(scenario)
    plan = plan_phase(scenario, 0, "r", maker)
    assert isinstance(plan, OpenLoopPlan)
    counter = HFPromptMaker(tokenizer_dir)
    assert [counter.count(s.prompt) for s in plan.specs] == [300, 300, 300]


def test_unloadable_tokenizer_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not a tokenizer")
    with pytest.raises(TokenizerError, match=str(bad)):
        HFPromptMaker(tmp_path)


def test_run_with_tokenizer_reports_the_realised_prompt_lengths(tokenizer_dir: Path, tmp_path: Path,
                                                                 sim_url: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: tok\nworkload: {prompt_tokens: 200, output_tokens: 4}\n"
                        "phases:\n  - name: p\n    load: {type: constant, rate: 10, requests: 5}\n")
    proc = harness("run", str(scenario), "--endpoint", sim_url, "--tokenizer", str(tokenizer_dir),
                   "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "r").iterdir()
    tokens = json.loads((run_dir / "summary.json").read_text())["phases"][0]["tokens"]
    # The simulator counts words, the prompt was built for BPE tokens: the difference is reported.
    assert tokens["prompt_reported"] == 5 and tokens["prompt_mismatched"] == 5
    assert tokens["prompt_diff_mean"] != 0
