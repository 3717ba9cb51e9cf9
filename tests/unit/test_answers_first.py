"""What users look for first, wherever they look: a conclusion for every run, the SLO that decided each sweep
point, the SLO line on the first chart even for one phase, a sane latency axis, TTFT by turn."""

from __future__ import annotations

from typing import Any

from harness.config.scenario import SLO
from harness.report.answer import thesis_specs
from harness.report.charts import AXIS_FLOOR_MS, cdf_specs
from harness.report.table import render_table
from harness.stats.conclusion import decided_by
from harness.stats.phase import fold_phase, phase_stats
from tests.helpers import MS, phase_json, rec, summary_of


def _records(tpot_ms: float, n: int = 10, ttft_ms: int = 10) -> list[Any]:
    """n ok requests of 5 tokens: first at ttft_ms, then one every tpot_ms."""
    return [rec(0, 0, [ttft_ms + int(k * tpot_ms) for k in range(5)], completion=5, idx=i) for i in range(n)]


def test_goodput_says_which_limit_each_request_missed() -> None:
    slo = SLO(ttft_ms=50.0, tpot_ms=20.0)
    stats = phase_stats(_records(30.0, n=6) + _records(10.0, n=4), slo)
    assert stats.goodput.missed == {"tpot_ms": 6} and abs(stats.goodput.fraction - 0.4) < 1e-9
    slow_start = phase_stats(_records(30.0, ttft_ms=80), slo)
    assert slow_start.goodput.missed == {"tpot_ms": 10, "ttft_ms": 10}  # both limits missed: both counted


def test_a_sweep_row_names_the_limit_that_failed_it_and_shows_tpot() -> None:
    slo = SLO(ttft_ms=50.0, tpot_ms=20.0)
    fast, slow = phase_json(_records(10.0), slo), phase_json(_records(30.0), slo)
    summary = summary_of([{**fast, "name": "s@rate=1"}, {**slow, "name": "s@rate=8"}])
    assert decided_by(summary.phases[1]) == "TPOT" and decided_by(summary.phases[0]) == ""
    text = render_table(summary)
    assert "TPOT p50 / p99 ms" in text and "0% ✗ TPOT" in text and "100% ✓" in text


def test_a_run_without_a_batch_still_gets_its_sentence() -> None:
    phase = {**phase_json(_records(10.0), SLO(ttft_ms=50.0)), "name": "interactive"}
    text = render_table(summary_of([phase]))
    sentence = text.strip().splitlines()[-1]
    assert sentence.startswith("interactive: ") and "TTFT p99 10 ms" in sentence
    assert "100% of requests within the SLOs" in sentence
    no_slo = render_table(summary_of([{**phase_json(_records(10.0), SLO()), "name": "p"}]))
    assert "within the SLOs" not in no_slo.strip().splitlines()[-1]


def test_the_slo_line_spans_the_chart_even_for_one_phase() -> None:
    phase = {**phase_json(_records(10.0), SLO(ttft_ms=50.0, tpot_ms=20.0)), "name": "p"}
    ttft, tpot = thesis_specs(summary_of([phase]))
    for spec, limit in ((ttft, 50.0), (tpot, 20.0)):
        line = spec["series"][-1]
        assert "SLO" in line["label"] and line["values"] == [limit] * len(spec["x"]) and len(spec["x"]) == 3
        assert spec["series"][0]["values"][1] is not None and spec["series"][0]["values"][0] is None
    assert len(thesis_specs(summary_of([{**phase_json(_records(10.0), SLO()), "name": "p"}]))) == 1  # TTFT only


def test_gaps_of_microseconds_are_counted_not_drawn() -> None:
    records = [rec(0, 0, [10, 20, 30], idx=i) for i in range(5)]
    records[0].chunk_ns = [10 * MS, 10 * MS + 2_000, 20 * MS]  # a 2 µs gap: two tokens read together
    itl = cdf_specs({"p": records})[1]
    assert itl["x"][0] >= AXIS_FLOOR_MS and "1 under 0.1 ms counted" in itl["title"]


def test_multi_turn_ttft_by_turn_is_in_the_table() -> None:
    records = _records(10.0, n=2) + _records(10.0, n=2, ttft_ms=25)
    for i, r in enumerate(records):
        r.session, r.turn = f"c{i % 2}", i // 2
    stats, fold = fold_phase(records, SLO())
    phase = {**stats.to_json(), "name": "chat", "sessions": fold.turns.stats().to_json()}  # as summary.py adds it
    text = render_table(summary_of([phase]))
    assert "TTFT p50 ms by turn" in text and "1: 10.0 · 2: 25.0" in text
    assert "by turn" not in render_table(summary_of([{**stats.to_json(), "name": "one-turn"}]))
