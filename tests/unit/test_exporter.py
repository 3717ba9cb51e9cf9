import bisect

import click
import numpy as np
import pytest
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.cli.output_flags import ExportFlags, export_changes
from harness.config.scenario import SLO, parse_scenario
from harness.report.pushgateway import summary_registry
from harness.run.exporter import LATENCY_BUCKETS_S, MAX_REASONS, LiveMetrics
from harness.stats.metrics import itl_samples_ns
from tests.helpers import phase_json, rec, summary_of


def _samples(metrics: LiveMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_exporter_counts_what_the_records_say() -> None:
    metrics = LiveMetrics("sc")
    sent = [0]
    metrics.open_phase("open", "poisson 4 req/s, 3 requests", 4.0, lambda: sent[0])
    ok = [rec(0, 1, [20, 30, 45], completion=3, idx=i) for i in range(3)]
    failed = rec(0, 1, [], status="timeout", idx=9)
    failed.reason = "first token timeout: 120 s"
    sent[0] = 6
    for r in [*ok, failed]:
        metrics.record(r)
    s = _samples(metrics)
    base = (("phase", "open"), ("scenario", "sc"))
    assert s[("harness_requests_total", (*base[:1], ("reason", ""), base[1], ("status", "ok")))] == 3
    assert s[("harness_requests_total", (*base[:1], ("reason", "first token timeout"), base[1],
                                         ("status", "errored")))] == 1
    assert s[("harness_output_tokens_total", base)] == 9  # one per token-bearing chunk
    assert s[("harness_input_tokens_total", base)] == 300
    assert s[("harness_requests_in_flight", base)] == 2  # six sent, four ended
    assert s[("harness_offered_requests_per_second", base)] == 4.0
    # Every ITL sample of every ok request is counted; TTFT 19 ms falls in the first bucket bound above it.
    itl = sum(len(itl_samples_ns(r)) for r in ok)
    assert s[("harness_itl_seconds_count", base)] == itl == 6
    above = bisect.bisect_left(LATENCY_BUCKETS_S, 0.019)
    assert s[("harness_ttft_seconds_bucket", (("le", _le(above - 1)), *base))] == 0
    assert s[("harness_ttft_seconds_bucket", (("le", _le(above)), *base))] == 3
    assert s[("harness_ttft_seconds_sum", base)] == pytest.approx(3 * 0.019)
    # Without thinking the answer's first token is the first: the same 19 ms, in its own histogram.
    assert s[("harness_ttft_answer_seconds_sum", base)] == pytest.approx(3 * 0.019)
    assert s[("harness_schedule_lag_seconds_count", base)] == 4
    metrics.end_phase()
    s = _samples(metrics)
    assert s[("harness_phase_info", (("load", "poisson 4 req/s, 3 requests"), *base))] == 0
    assert s[("harness_requests_in_flight", base)] == 0


def _le(k: int) -> str:
    return f"{LATENCY_BUCKETS_S[k]:g}"


def test_latency_buckets_carry_request_ids_as_exemplars() -> None:
    metrics = LiveMetrics("sc")
    metrics.open_phase("p", "batch 2 × 1", None, lambda: 2)
    metrics.record(rec(0, 0, [5, 6], idx=1))
    metrics.record(rec(0, 0, [900, 905], idx=2))
    text = generate_latest(metrics.registry).decode()
    first, slow = bisect.bisect_left(LATENCY_BUCKETS_S, 0.005), bisect.bisect_left(LATENCY_BUCKETS_S, 0.9)
    bucket = 'harness_ttft_seconds_bucket{{le="{}",phase="p",scenario="sc"}} {} # {{request_id="{}"}} {} '
    assert bucket.format(_le(first), "1.0", "r1", "0.005") in text
    assert bucket.format(_le(slow), "2.0", "r2", "0.9") in text
    assert "harness_offered_requests_per_second{" not in text  # closed loop and batches have no schedule


def test_failure_causes_are_a_bounded_label() -> None:
    metrics = LiveMetrics("sc")
    metrics.open_phase("p", "x", None, lambda: 0)
    for i in range(MAX_REASONS + 5):
        bad = rec(0, 0, [], status="transport_error", idx=i)
        bad.reason = f"cause {i}: detail"
        metrics.record(bad)
    reasons = {dict(k[1])["reason"] for k in _samples(metrics) if k[0] == "harness_requests_total"}
    assert len(reasons) == MAX_REASONS + 1 and "other" in reasons


def test_buckets_span_llm_latencies() -> None:
    assert LATENCY_BUCKETS_S[0] == 0.00025 and LATENCY_BUCKETS_S[-1] == 600
    assert list(LATENCY_BUCKETS_S) == sorted(LATENCY_BUCKETS_S) and len(set(LATENCY_BUCKETS_S)) == 260
    # From 1 ms to 60 s no bucket is more than 4.5% wider than the one before: histogram_quantile's error bound.
    fine = np.array([b for b in LATENCY_BUCKETS_S if 0.001 <= b <= 60])
    assert fine[0] == 0.001 and fine[-1] == 60 and (fine[1:] / fine[:-1]).max() < 1.045


def test_the_pushed_summary_holds_the_phase_figures() -> None:
    records = [rec(0, 0, [100 + i, 110 + i, 130 + i], completion=3, idx=i) for i in range(10)]
    phase = {"name": "open", **phase_json(records, SLO(ttft_ms=105)),
             "thresholds": [{"metric": "ttft_p99", "limit": "<100ms", "observed": 109.0, "unit": "ms",
                             "passed": False}]}
    summary = summary_of([phase], scenario="s", run_id="abc", complete=False,
                         started_at="2026-11-30T00:00:00+00:00")
    text = generate_latest(summary_registry([summary])).decode()
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for family in text_string_to_metric_families(text) for s in family.samples}
    for repeat in ("1", "mean"):  # one run: its own figures and the mean are the same
        assert values[("harness_summary_ttft_seconds", (("phase", "open"), ("quantile", "0.5"),
                                                        ("repeat", repeat)))] == pytest.approx(
            phase["latency_ms"]["ttft"]["p50"] / 1000)
    assert values[("harness_summary_goodput_fraction", (("phase", "open"), ("repeat", "1")))] == 0.6
    assert values[("harness_summary_requests", (("phase", "open"), ("repeat", "1"), ("status", "ok")))] == 10
    assert values[("harness_summary_client_limited", (("phase", "open"), ("repeat", "mean")))] == 0
    assert values[("harness_threshold_passed", (("limit", "<100ms"), ("metric", "ttft_p99"), ("phase", "open"),
                                                ("repeat", "1")))] == 0
    assert values[("harness_run_complete", (("repeat", "1"),))] == 0
    assert values[("harness_run_timestamp_seconds", (("repeat", "1"),))] == 1795996800
    assert values[("harness_run_info", (("repeat", "1"), ("run_id", "abc")))] == 1


def test_repeats_push_each_run_and_their_mean() -> None:
    records = [rec(0, 0, [100 + i, 110 + i, 130 + i], completion=3, idx=i) for i in range(10)]
    runs = []
    for k, rate in enumerate((100.0, 200.0, 600.0)):
        phase = {"name": "open", **phase_json(records, SLO())}
        phase["throughput"] = {**phase["throughput"], "output_tokens_per_s": rate}
        runs.append(summary_of([phase], scenario="s", run_id=f"r{k}"))
    text = generate_latest(summary_registry(runs)).decode()
    tokens = {s.labels["repeat"]: s.value for family in text_string_to_metric_families(text) for s in family.samples
              if s.name == "harness_summary_output_tokens_per_second"}
    assert tokens == {"1": 100, "2": 200, "3": 600, "mean": 300}
    assert text.count("harness_run_info{") == 3


def test_the_group_is_job_scenario_and_labels_not_the_host() -> None:
    from harness.config.scenario import Pushgateway
    from harness.report.pushgateway import grouping
    from harness.stats.schema import ShardInfo

    cfg = Pushgateway(url="http://gw", labels={"branch": "main"})
    assert grouping(cfg, "nightly") == {"scenario": "nightly", "branch": "main"}
    # Shards by hand push side by side, one group each, not over each other; a lone "shard" 0/1 is a whole run.
    assert grouping(cfg, "nightly", ShardInfo(index=1, count=2)) == {"scenario": "nightly", "shard": "1/2",
                                                                      "branch": "main"}
    assert grouping(cfg, "nightly", ShardInfo(index=0, count=1)) == grouping(cfg, "nightly")


def test_a_shard_by_hand_labels_every_live_series_with_its_share() -> None:
    metrics = _one_record(LiveMetrics("sc", "1/2"))
    metrics.verdicts({"open": False})
    s = _samples(metrics)
    names = {name for name, _ in s}
    assert {"harness_ttft_seconds_bucket", "harness_requests_total", "harness_client_limited"} <= names
    assert all(dict(labels).get("shard") == "1/2" for _, labels in s), s  # every series, histograms too
    whole = _samples(_one_record(LiveMetrics("sc")))
    assert all("shard" not in dict(labels) for _, labels in whole)  # a whole run: no such label


def _one_record(metrics: LiveMetrics) -> LiveMetrics:
    metrics.open_phase("open", "constant 2 req/s, 2 requests", 2.0, lambda: 2)
    metrics.record(rec(0, 1, [20, 30], completion=2, idx=1))
    return metrics


def _scenario(extra: str = "") -> object:
    import yaml

    return parse_scenario(yaml.safe_load("name: t\nphases: [{name: a, load: {type: batch, size: 1}}]\n" + extra),
                          "test")


def test_export_flags_over_the_scenario() -> None:
    scenario = _scenario("pushgateway: http://gw:9091\nmetrics_port: 9400\n")
    assert scenario.pushgateway.url == "http://gw:9091" and scenario.pushgateway.job == "harness"  # type: ignore
    flagged = scenario.changed(**export_changes(scenario, ExportFlags(metrics_port=9500, pushgateway_job="nightly",
                                                                      pushgateway_label=("branch=main",))))
    assert flagged.metrics_port == 9500 and flagged.pushgateway is not None
    assert flagged.pushgateway.job == "nightly" and flagged.pushgateway.labels == {"branch": "main"}


@pytest.mark.parametrize(("flags", "hint"), [
    ({"pushgateway": "http://gw", "pushgateway_label": ("nolabel",)}, "--pushgateway-label"),
    ({"pushgateway_job": "nightly"}, "--pushgateway-job"),
])
def test_bad_export_flags_name_the_flag(flags: dict[str, object], hint: str) -> None:
    with pytest.raises(click.BadParameter) as err:
        export_changes(_scenario(), ExportFlags(**flags))  # type: ignore[arg-type]
    assert err.value.param_hint == hint
