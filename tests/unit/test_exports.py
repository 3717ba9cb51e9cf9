"""Files dashboards already read: a CSV row per phase named as the registry, vLLM bench's result JSON with the
keys vLLM itself writes, and the run's tags (--label, --metadata) bounded and carried along."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from harness.config.labels import check_labels, check_metadata, secret_like
from harness.config.metric_registry import REGISTRY
from harness.config.scenario import SLO
from harness.limits import LABELS
from harness.report.answer import header_facts
from harness.report.exports import csv_text, vllm_result
from harness.report.pushgateway import figures
from harness.run.exporter import LiveMetrics
from harness.stats.schema import Summary
from harness.stats.thresholds import observed
from tests.helpers import MS, phase_json, rec, summary_of

# What `vllm bench serve --save-result` wrote here (vLLM 0.32.0 CPU, bench/vs_vllm_bench.py, the Poisson load;
# its per-request lists cut to three): the keys a dashboard built on vLLM's files reads.
VLLM_RESULT = Path(__file__).parent / "golden" / "vllm_bench_serve_result.json"


def _records(n: int = 60) -> list[Any]:
    return [rec(i * 50, i * 50 + 1, [i * 50 + 40 + 12 * k for k in range(8)], completion=8, idx=i)
            for i in range(n)]


def _summary(**run: Any) -> Summary:
    phase = {**phase_json(_records(), SLO(ttft_ms=100)), "name": "open",
             "config": {"name": "open", "load": {"type": "poisson", "rate": 20, "requests": 60}}}
    return summary_of([phase], run_id="r1", started_at="2026-12-06T10:00:00+00:00", **run)


def test_the_csv_has_a_row_per_phase_and_a_column_per_registry_entry_holding_its_value() -> None:
    summary = _summary(labels={"engine": "vllm-0.32", "branch": "main"})
    other = _summary(labels={"gpu": "h100"})
    rows = list(csv.DictReader(io.StringIO(csv_text([summary, other]))))
    assert len(rows) == 2
    row = rows[0]
    assert set(REGISTRY) <= set(row) and {"label.engine", "label.branch", "label.gpu"} <= set(row)
    assert (row["run_id"], row["phase"], row["load"], row["label.engine"], rows[1]["label.engine"]) == (
        "r1", "open", "poisson", "vllm-0.32", "")
    phase = summary.phases[0]
    for name in REGISTRY:
        value = observed(name, phase)
        assert (row[name] == "") == (value is None), name
        if value is not None:
            assert float(row[name]) == pytest.approx(value, rel=1e-5), name
    assert int(row["requests_ok"]) == 60 and float(row["ttft_p50"]) == pytest.approx(39, abs=0.01)


def test_the_vllm_result_has_every_key_vllm_writes_with_the_same_kind_of_value() -> None:
    theirs = json.loads(VLLM_RESULT.read_text())
    summary = _summary(labels={"engine": "sim"}, metadata={"commit": "abc1234"})
    ours = vllm_result(summary, summary.phases[0], _records())
    missing = sorted(set(theirs) - set(ours))
    assert not missing, missing
    for key, value in theirs.items():
        if value is not None and ours[key] is not None:
            assert isinstance(ours[key], type(value)) or {type(value), type(ours[key])} <= {int, float}, key
    lat = summary.phases[0].latency_ms
    assert (ours["p99_ttft_ms"], ours["median_tpot_ms"], ours["mean_e2el_ms"]) == (
        lat.ttft.p99, lat.tpot.p50, lat.e2e.mean)
    assert ours["mean_itl_ms"] == lat.chunk_gap.mean  # vLLM's ITL is its gap between chunks
    assert ours["completed"] == 60 and ours["request_rate"] == 20 and ours["burstiness"] == 1.0
    assert ours["engine"] == "sim" and ours["commit"] == "abc1234"  # as vLLM's --metadata puts them
    assert len(ours["latencies"]) == 60 and ours["latencies"][0] == pytest.approx(123 * MS / 1e9)  # last token − sent


def test_labels_are_few_short_named_as_prometheus_takes_them_and_never_a_secret() -> None:
    assert check_labels({"branch": "main", "engine": "vllm-0.32"}) == {"branch": "main", "engine": "vllm-0.32"}
    for bad, said in (({"Branch": "x"}, "lower-case"), ({"phase": "x"}, "use that name"),
                      ({"k": "x" * 65}, "at most 64"), ({"k": "a\nb"}, "control"),
                      ({f"k{i}": "v" for i in range(LABELS + 1)}, "at most"),
                      ({"token": "sk-proj-abcdef"}, "looks like a key"),
                      ({"token": "hf_" + "a1" * 20}, "looks like a key")):
        with pytest.raises(ValueError, match=said):
            check_labels(bad)
    assert not secret_like("4f06073d2e1c9a3b5f0e7d6c8b9a0f1e2d3c4b5a")  # a commit id is a tag
    assert secret_like("Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo")
    assert check_metadata({"commit": "4f06073", "driver": 550.54, "ok": True}) == {
        "commit": "4f06073", "driver": 550.54, "ok": True}
    with pytest.raises(ValueError, match="not a list"):
        check_metadata({"gpus": [0, 1]})


def test_labels_reach_the_report_the_pushgateway_and_the_live_exporter() -> None:
    summary = _summary(labels={"engine": "sim", "branch": "main"}, metadata={"commit": "abc1234"})
    facts = dict(header_facts(summary))
    assert facts["labels"] == "engine=sim, branch=main" and facts["metadata"] == "commit: abc1234"
    pushed = figures(summary)
    assert pushed[("harness_run_labels", "1, labelled with the run's tags (--label k=v)", ("engine", "branch"))] == {
        ("sim", "main"): 1.0}
    live = LiveMetrics("sc", labels={"engine": "sim"})
    try:
        assert live.registry.get_sample_value("harness_run_labels", {"scenario": "sc", "engine": "sim"}) == 1.0
    finally:
        live.close()
    assert not any(name == "harness_run_labels" for name, _, _ in figures(_summary()))
