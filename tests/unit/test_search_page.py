"""A search's page: goodput and each SLO's p99 against the trials' rates, the capacity on the target line, and a
row per trial linking to its run folder."""

from __future__ import annotations

from harness.config.scenario import SLO
from harness.report.search_page import render_search, search_specs
from harness.stats.capacity import Capacity, SearchTrial


def _trial(index: int, rate: float, met: bool, ttft: float, late: bool = False) -> SearchTrial:
    return SearchTrial(rate, 1, 1.0 if met else 0.6, 100, False, rate * 50, index, met, "" if met else "TTFT",
                       client_limited=late, p99_ms={"ttft_ms": ttft, "tpot_ms": 20.0})


TRIALS = [_trial(1, 20, True, 120), _trial(2, 30, False, 900, late=True), _trial(3, 25, True, 300)]


def test_the_curves_are_the_trials_in_rate_order_with_the_target_and_slo_lines() -> None:
    found = Capacity(25.0, (23.0, 27.0), TRIALS)
    goodput, ttft = search_specs(found, SLO(ttft_ms=400), 0.95)  # no TPOT limit: no TPOT chart
    assert goodput["x"] == [20, 25, 30]
    assert goodput["series"][0]["values"] == [100.0, 100.0, 60.0] and goodput["series"][1]["values"] == [95.0] * 3
    capacity = next(s for s in goodput["series"] if s["label"].startswith("capacity"))
    assert capacity["values"] == [None, 95.0, None]  # on the target line, at the trial nearest 25 req/s
    assert ttft["series"][0]["values"] == [120, 300, 900] and ttft["series"][1]["values"] == [400] * 3


def test_the_page_links_each_trial_and_marks_the_client_limited() -> None:
    page = render_search(Capacity(25.0, None, TRIALS), SLO(ttft_ms=400), 0.95, [("found", "capacity 25 req/s")],
                         {1: "trial-01", 2: "trial-02", 3: "trial-03"})
    assert "href='trial-02/report.html'" in page and page.count("client-limited") == 1
    assert "capacity 25 req/s" in page and "TTFT p99 against the trial" in page
