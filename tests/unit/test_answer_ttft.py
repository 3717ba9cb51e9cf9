"""The answer's first token as a latency of its own: a reasoning model streams its thinking first, TTFT times
that first token, and what a chat user waits for is the answer's. One registry entry (`ttft_answer`) that every
reader takes: SLOs, goodput, the table, the cards, the conclusion, compare, the history and the Pushgateway."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.metric_registry import Latency, metric
from harness.config.scenario import SLO
from harness.records import RecordWriter
from harness.report.answer import cards_html
from harness.report.notes import notes
from harness.report.pushgateway import figures
from harness.report.table import render_table
from harness.stats.compare import blocks
from harness.stats.schema import Summary
from harness.tools.compare import PhaseBlocks, Run, compare_sides, tolerances
from harness.tools.history import add, baseline
from harness.tools.search import parse_slo
from tests.helpers import MS, phase_json, rec, summary_of

THINK_MS = 900  # from the first thinking token to the answer's first token


def _records(think_ms: int = THINK_MS, n: int = 40, ttft_ms: int = 40) -> list[Any]:
    """n requests of 5 tokens, one every 100 ms; with think_ms, a reasoning model's: 4 thinking tokens reported,
    the answer's first token think_ms after the first."""
    out = []
    for i in range(n):
        t0 = i * 100
        r = rec(t0, t0, [t0 + ttft_ms + 10 * k for k in range(5)], completion=5, idx=i)
        if think_ms:
            r.first_content_ns = r.first_token_ns + think_ms * MS
            r.reasoning_tokens = 4
        out.append(r)
    return out


def _summary(slo: SLO, think_ms: int = THINK_MS) -> Summary:
    return summary_of([{**phase_json(_records(think_ms), slo), "name": "chat"}])


def test_the_slo_parser_takes_the_answers_ttft_and_names_it_when_refusing() -> None:
    assert parse_slo("ttft_answer=500ms,tpot=50ms") == SLO(ttft_answer_ms=500, tpot_ms=50)
    assert parse_slo("ttft_answer_p99=1.5s").ttft_answer_ms == 1500
    with pytest.raises(ValueError, match="ttft_answer=…"):
        parse_slo("answer=500ms")


def test_the_old_name_still_reads_as_a_metric_and_in_a_summary() -> None:
    assert metric("time_to_first_content_p99") is metric("ttft_answer_p99")
    data = _summary(SLO()).to_json()
    data["phases"][0]["latency_ms"]["time_to_first_content"] = data["phases"][0]["latency_ms"].pop("ttft_answer")
    assert Summary.from_json(data).phases[0].latency_ms.ttft_answer.p99 == pytest.approx(40 + THINK_MS)


def test_an_answer_slo_fails_the_row_the_goodput_the_sentence_and_the_card() -> None:
    summary = _summary(SLO(ttft_answer_ms=500))
    phase = summary.phases[0]
    assert phase.goodput.fraction == 0 and phase.goodput.missed == {"ttft_answer_ms": 40}
    text = render_table(summary)
    assert "TTFT (answer) p99 ≤ 500 ms                   940.0 ✗" in text
    sentence = text.strip().splitlines()[-1]
    assert "TTFT p99 40 ms to the first thinking token, 940 ms to the answer's" in sentence
    assert "0% of requests within the SLOs (TTFT (answer))" in sentence
    card = cards_html(summary)
    assert "card missed" in card and "TTFT (answer) p99 940 ms ✗" in card
    assert not any("judged the first thinking token" in line for line in notes(summary))


def test_a_ttft_slo_on_a_reasoning_stream_says_it_judged_the_thinking_and_names_the_answers() -> None:
    summary = _summary(SLO(ttft_ms=500))
    assert summary.phases[0].goodput.fraction == 1
    assert "TTFT (thinking) p99 ≤ 500 ms" in render_table(summary)
    card = cards_html(summary)
    assert "TTFT (thinking) p99 40 ms ✓" in card and "TTFT (answer) p99 940 ms (no SLO)" in card
    (said,) = [line for line in notes(summary) if "judged the first thinking token" in line]
    assert "--slo ttft_answer=500ms" in said and "chat" in said
    plain = _summary(SLO(ttft_ms=500), think_ms=0)  # no thinking: TTFT is the answer's, nothing to say
    assert "(thinking)" not in render_table(plain) + cards_html(plain)
    assert not any("thinking" in line for line in notes(plain))


def test_the_pushgateway_pushes_the_answers_ttft_by_quantile() -> None:
    pushed = {name: values for (name, _, _), values in figures(_summary(SLO())).items()}
    assert pushed["harness_summary_ttft_answer_seconds"][("chat", "0.99")] == pytest.approx(0.94)


def _side(run_id: str, think_ms: int) -> Run:
    return Run(run_id, run_id, {}, {"chat": PhaseBlocks(blocks(_records(think_ms, n=400), 0, 400 * 100 * MS),
                                                        None)})


def test_compare_judges_the_answers_ttft_only_where_a_model_thought() -> None:
    changes = {c.result.metric: c.result for c in compare_sides([_side("a", THINK_MS)], [_side("b", 1400)],
                                                                 tolerances({}))}
    assert changes["ttft_answer_p50"].verdict == "regression"
    assert changes["ttft_answer_p50"].change == pytest.approx((1440 / 940) - 1)
    assert changes["ttft_p50"].verdict == "within tolerance"  # the thinking started as early as before
    plain = {c.result.metric for c in compare_sides([_side("a", 0)], [_side("b", 0)], tolerances({}))}
    assert "ttft_p50" in plain and not any(name.startswith(Latency.TTFT_ANSWER) for name in plain)


def _run_dir(path: Path, think_ms: int) -> Path:
    records = _records(think_ms)
    path.mkdir()
    with RecordWriter(path) as writer:
        for r in records:
            writer.write(dataclasses.replace(r, phase="chat"))
    summary = summary_of([{**phase_json(records, SLO()), "name": "chat"}], run_id=path.name,
                         started_at="2026-12-06T10:00:00+00:00")
    (path / "summary.json").write_text(json.dumps(summary.to_json()), encoding="utf-8")
    (path / "scenario.yaml").write_text("name: tiny\nphases: [{name: chat}]\n", encoding="utf-8")
    return path


def test_the_history_keeps_the_answers_ttft_of_a_run_that_thought(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    add(db, _run_dir(tmp_path / "thought", THINK_MS))
    add(db, _run_dir(tmp_path / "plain", 0))
    kept = {run.run_id: run.phases["chat"].blocks for run in baseline(db, "tiny", 2)}
    assert kept["thought"][0].latencies[Latency.TTFT_ANSWER][0] == pytest.approx(40 + THINK_MS)
    assert all(not len(b.latencies[Latency.TTFT_ANSWER]) for b in kept["plain"])
