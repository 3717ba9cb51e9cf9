import json

import pytest

from harness.report import charts
from harness.report.charts import bin_seconds, chart_html, over_time, per_request
from tests.helpers import rec


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


def test_a_batch_running_for_seconds_is_in_flight_in_every_bin_it_spans() -> None:
    """32 requests sent together at 10 ms and answered at 5 s: no event in between, yet 32 are in flight in every
    bin until they end (the peak was taken at events only, and the middle bins read 0)."""
    records = [rec(10, 10, [4_000, 5_000], completion=2, idx=i) for i in range(32)]
    _, flight = over_time(records, 0)
    values = flight["series"][0]["values"]
    width = float(flight["title"].split("each ")[1].split(" s")[0])
    ended = int(5.0 / width)  # the bin holding the end
    assert values[:ended] == [32] * ended and values[-1] < 32  # the last bin holds the ends


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


def test_cdfs_are_shares_on_one_grid_and_absent_without_successes() -> None:
    from harness.report.charts import cdf_specs

    records = [rec(0, 0, [10 * (i + 1), 10 * (i + 1) + 5], idx=i) for i in range(10)]  # TTFT 10 … 100 ms
    ttft, itl, e2e = cdf_specs({"p": records})
    assert ttft["xlog"] and ttft["x"][0] == 10 and ttft["x"][-1] == 100
    shares = ttft["series"][0]["values"]
    assert shares[0] == 0.1 and shares[-1] == 1.0 and shares == sorted(shares)
    assert itl["series"][0]["values"][-1] == 1.0 and e2e["xlabel"] == "E2E (ms)"
    assert cdf_specs({"p": [rec(0, 0, [], status="timeout")]}) == []


def test_workload_and_sweep_specs() -> None:
    from harness.report.charts import sweep_specs, workload_specs

    records = [rec(0, 0, [5, 6], completion=2, idx=i) for i in range(4)]
    prompt, output = workload_specs({"a": records, "b": records[:1]})
    assert sum(output["series"][0]["values"]) == 4  # two token-bearing chunks each
    assert [s["label"] for s in prompt["series"]] == ["a", "b"]
    assert sum(prompt["series"][0]["values"]) == 4 and sum(prompt["series"][1]["values"]) == 1
    from harness.config.scenario import SLO
    from tests.helpers import phase_json, summary_of

    base = phase_json(records, SLO())
    phases = []
    for r in (4, 1, 2):
        lat = base["latency_ms"]
        throughput = {**base["throughput"], "output_tokens_per_s": r * 100.0}
        phases.append({**base, "name": f"s@rate={r}", "throughput": throughput,
                       "latency_ms": {**lat, "ttft": {**lat["ttft"], "p50": 10.0 * r, "p99": 20.0 * r},
                                      "tpot": {**lat["tpot"], "p50": 5.0, "p99": 6.0}}})
    points = summary_of(phases).phases
    ttft, tpot = sweep_specs("s", points, SLO(ttft_ms=50.0), points[2])
    assert ttft["x"] == [100.0, 200.0, 400.0] and ttft["series"][0]["values"] == [10.0, 20.0, 40.0]
    assert ttft["series"][2]["label"] == "SLO 50 ms" and ttft["title"].endswith("knee: s@rate=2")
    assert [s["label"] for s in tpot["series"]] == ["TPOT p50", "TPOT p99", "knee: s@rate=2"]  # no TPOT SLO line
    assert tpot["series"][2]["values"] == [None, 6.0, None]  # the knee marked at its own point
