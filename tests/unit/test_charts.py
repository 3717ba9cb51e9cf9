import json

import pytest

from harness.report import charts
from harness.report.charts import bin_seconds, chart_html, over_time, per_request
from tests.unit.test_stats import rec


@pytest.mark.parametrize(("span_s", "width"), [(3.4, 0.1), (10, 0.25), (60, 2), (5400, 300), (1e6, 3600)])
def test_bins_fit_the_phase_length(span_s: float, width: float) -> None:
    assert bin_seconds(span_s) == width


def test_rates_come_out_per_second_whatever_the_bin() -> None:
    # 200 requests, one every 50 ms over 10 s, each answered 40 ms later with 4 tokens in 2 chunks.
    records = [rec(t := i * 50 + 5, t, [t + 30, t + 40], completion=4, idx=i) for i in range(200)]
    for r in records:
        r.chunk_tokens = [1, 3]
    rates, flight = over_time(records, 0)
    assert rates["title"] == "rates per second, in 0.25 s bins"
    arrivals, completed, tokens = (s["values"] for s in rates["series"])
    assert arrivals[:40] == [20.0] * 40 and completed[:40] == [20.0] * 40 and tokens[:40] == [80.0] * 40
    assert max(flight["series"][0]["values"]) == 1  # never two at once
    assert all(s["title"] != "failed requests per second, by status" for s in (rates, flight))


def test_failures_get_a_chart_only_when_there_are_some() -> None:
    records = [rec(0, 0, [10], idx=0), rec(0, 5, [], status="timeout", idx=1), rec(0, 5, [], status="timeout", idx=2)]
    specs = over_time(records, 0)
    assert [s["label"] for s in specs[-1]["series"]] == ["timeout"]


def test_each_request_is_a_named_point_and_too_many_keep_the_slowest(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [rec(i, i, [i + 10 + (500 if i == 37 else 0), i + 20], idx=i) for i in range(100)]
    spec = per_request(records, 0)
    assert spec is not None and len(spec["ids"]) == 100 and spec["ids"][37] == "r37"
    assert spec["series"][0]["values"][37] == 510.0  # TTFT in ms
    monkeypatch.setattr(charts, "MAX_POINTS", 20)
    few = per_request(records, 0)
    assert few is not None and 10 <= len(few["ids"]) <= 20 and "r37" in few["ids"]  # the slowest stays
    assert few["x"] == sorted(few["x"]) and "shown" in few["title"]
    assert per_request([rec(0, 0, [], status="timeout")], 0) is None  # nothing succeeded: no empty chart


def test_a_chart_is_inert_json_in_the_page() -> None:
    spec = {"title": "</script><b>", "xlabel": "s", "x": [0.0, None], "series": []}
    page = chart_html(spec, 3)
    assert "</script><b>" not in page.split("<script>", 1)[1].rsplit("</script>", 1)[0]
    payload = page.split(", ", 1)[1].rsplit(");", 1)[0]
    assert json.loads(payload.replace("<\\/", "</")) == spec
