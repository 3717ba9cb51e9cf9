"""`harness predict --accelerators`: the matrix (a golden file), how each accelerator is set up, and the choice."""

from __future__ import annotations

import asyncio
import html
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import SLO, Scenario, parse_scenario
from harness.devices.catalogue import catalogue, use
from harness.devices.models import ModelSpec
from harness.report.matrix import matrix_html, render_matrix
from harness.tools.matrix import accelerator_matrix, best_choices, on_accelerator

GOLDEN = Path(__file__).resolve().parent / "golden" / "matrix.txt"
SCENARIO = {
    "name": "matrix", "seed": 3, "workload": {"prompt_tokens": 512, "output_tokens": 64},
    "slo": {"ttft_ms": 300, "tpot_ms": 30}, "simulator": {"accelerator": "h100-sxm", "model": "llama-3.1-8b"},
    "phases": [{"name": "chat", "load": {"type": "poisson", "rate": 8, "requests": 40}},
               {"name": "bulk", "load": {"type": "batch", "size": 32, "batches": 1}}],
}
PRICES = {"a100-80g": 1.6, "h100-sxm": 2.5, "b200": 5.5}


def scenario(**changes: Any) -> Scenario:
    return parse_scenario({**SCENARIO, **changes}, "test")


def test_the_matrix_of_a_fixed_seed_scenario_matches_its_golden_file() -> None:
    result = asyncio.run(accelerator_matrix(scenario(), ["a100-80g", "h100-sxm", "b200", "cerebras-cs3"], PRICES,
                                            scenario().slo))
    text = render_matrix(result)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == GOLDEN.read_text(encoding="utf-8")
    page = matrix_html(result)
    assert page.count("<svg") == 4 and "b200" in page  # tokens/s and cost bars for each of the two phases
    # The answer first, whole (it was cut at the edge of the table's <pre>), and each phase's choice marked.
    advice = [line for line in text.splitlines() if line.startswith("For ")]
    assert advice and all(f"<p class='advice'>{html.escape(line)}</p>" in page for line in advice)
    assert page.index("class='advice'") < page.index("<svg") < page.index("<pre>")
    for choice in result["best"].values():
        if choice["accelerator"] is not None:
            assert f"★ {choice['accelerator']}" in page


def test_each_accelerator_gets_its_own_batch_defaults_and_the_smallest_tp_that_holds_the_model() -> None:
    base = scenario(simulator={"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 4})
    a100 = on_accelerator(base, "a100-80g", SLO())
    # Two A100s hold the weights but a KV cache of ~27k tokens, short of one 128k request: vLLM would not start.
    assert a100 is not None and (a100.simulator.tp, a100.simulator.max_num_seqs) == (4, 256)
    b200 = on_accelerator(base, "b200", SLO(ttft_ms=1))
    assert b200 is not None and (b200.simulator.tp, b200.simulator.max_num_batched_tokens) == (2, 16384)
    assert b200.slo == SLO(ttft_ms=1)
    # Values the scenario chose itself stay.
    chosen = scenario(simulator={"accelerator": "h100-sxm", "model": "llama-3.1-8b", "max_num_seqs": 48})
    moved = on_accelerator(chosen, "a100-80g", SLO())
    assert moved is not None and moved.simulator.max_num_seqs == 48


def test_a_model_no_tp_up_to_8_holds_is_said_not_to_fit() -> None:
    use(catalogue().with_models(ModelSpec("huge", 120, 16384, 128, 8, 128, 900.0, 128256)))
    assert on_accelerator(scenario(simulator={"model": "huge"}), "a100-80g", SLO()) is None


def column(name: str, chat: tuple[float, float, float | None], bulk: float, capacity: float | None = None) -> dict:
    """(goodput share, TTFT p99, $/M) of the chat phase and tokens/s of the bulk one."""
    share, ttft, cost = chat
    return {"accelerator": name, "fits": True, "tp": 1, "capacity": {"rps": capacity} if capacity else None,
            "phases": {"chat": {"goodput_share": share, "ttft_p99_ms": ttft, "cost_per_m_tokens": cost,
                                "good_tokens_per_s": 400 * share},
                       "bulk": {"good_tokens_per_s": bulk, "cost_per_m_tokens": None, "goodput_share": 0.0}}}


def test_the_choice_per_phase() -> None:
    kinds = {"chat": "interactive", "bulk": "batch"}
    cols = [column("x", (1.0, 300, 4.0), 900), column("y", (0.9, 200, 2.0), 1200), column("z", (1.0, 250, None), 800)]
    best = best_choices(cols, kinds)
    # y is cheapest but misses the SLOs for 10% of requests; z has no price: named as unpriced, not dropped.
    assert best["chat"] == {"accelerator": "x", "by": "cost", "runner_up": None, "unpriced": ["z"]}
    assert best["bulk"] == {"accelerator": "y", "by": "tokens/s", "runner_up": "x"}
    unpriced = [column("x", (1.0, 300, None), 900), column("z", (1.0, 250, None), 800)]
    assert best_choices(unpriced, kinds)["chat"]["accelerator"] == "z"  # the lower TTFT p99
    searched = [column("x", (1.0, 300, None), 900, capacity=9.0), column("z", (1.0, 250, None), 800, capacity=6.0)]
    assert best_choices(searched, kinds)["chat"] == {"accelerator": "x", "by": "capacity", "runner_up": "z"}
    assert best_choices([column("y", (0.5, 900, 1.0), 1)], kinds)["chat"]["accelerator"] is None


@pytest.mark.parametrize(("args", "problem"), [
    (["--accelerators", "h100-sxm,h900"], "unknown accelerator 'h900'"),
    (["--accelerators", "h100-sxm", "--price", "h100-sxm=cheap"], "'h100-sxm=cheap'"),
    (["--price", "h100-sxm=2"], "go with --accelerators"),
    (["--accelerators", "h100-sxm", "--slo", "ttft=fast"], "not a duration"),
])
def test_bad_matrix_flags_exit_2_naming_them(tmp_path: Path, args: list[str], problem: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text('{"name": "s", "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1, "requests": 2}}]}')
    result = CliRunner().invoke(main, ["predict", str(path), *args])
    assert result.exit_code == 2 and problem in result.output, result.output


def test_the_matrix_says_which_accelerator_it_is_predicting(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text('{"name": "s", "workload": {"prompt_tokens": 64, "output_tokens": 8}, '
                    '"phases": [{"name": "p", "load": {"type": "poisson", "rate": 1, "requests": 3}}]}')
    result = CliRunner().invoke(main, ["predict", str(path), "--accelerators", "h100-sxm,b200"])
    assert result.exit_code == 0, result.output
    assert "predicting 1/2: h100-sxm…" in result.stderr and "predicting 2/2: b200…" in result.stderr
    assert "predicting" not in result.stdout  # the matrix itself stays clean for a pipe


def test_a_row_stands_for_the_devices_it_needs_and_pays_for_each() -> None:
    """70B on CS-3 systems: weights and a 128k-token KV cache need five; a row prices five. On H100 with the
    scenario's own max_model_len two hold it, which vLLM's defaults would refuse: the row says so."""
    base = scenario(simulator={"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 4})
    prices = {"cerebras-cs3": 100.0, "h100-sxm": 2.5}
    result = asyncio.run(accelerator_matrix(base, ["cerebras-cs3", "h100-sxm"], prices, base.slo))
    cs3, h100 = result["columns"]
    assert (cs3["tp"], cs3["device"], cs3["needs"]) == (5, "CS-3 system (one wafer)", None)
    assert (h100["tp"], h100["device"], h100["needs"]) == (4, "GPU", None)
    row = cs3["phases"]["bulk"]
    assert row["cost_per_m_tokens"] == pytest.approx(100.0 * 5 / 3600 / row["good_tokens_per_s"] * 1e6)
    text = render_matrix(result)
    assert "(5 × CS-3 system (one wafer))" in text or "cerebras-cs3: one device is a CS-3 system" in text
    short = scenario(simulator={"accelerator": "h100-sxm", "model": "llama-3.1-70b", "tp": 4, "max_model_len": 16384})
    marked = asyncio.run(accelerator_matrix(short, ["h100-sxm"], {}, short.slo))
    (column,) = marked["columns"]
    assert (column["tp"], column["needs"]) == (2, "max_model_len 16,384")
    shown = render_matrix(marked)
    assert " 2* " in shown and "* h100-sxm fits on 2 only with the scenario's max_model_len 16,384" in shown
