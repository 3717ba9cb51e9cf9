"""The simulator counts inter-token gaps in bulk, and holds only a bounded number of them between scrapes."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.sim.engine import SimRequest
from harness.sim.metrics import SimMetrics


def test_an_unscraped_simulator_holds_a_bounded_number_of_gaps_and_counts_them_all() -> None:
    metrics = SimMetrics("m")
    req = SimRequest("r", 8, 20_001, 0)
    for i in range(20_001):
        req.token_ns.append(1_000_000 * (i + 1))
        metrics.observe_tokens(req, i)
        assert len(metrics._gaps) <= 8192
    metrics._count_gaps()  # what a scrape does first
    text = generate_latest(metrics.registry).decode()
    itl = next(f for f in text_string_to_metric_families(text) if f.name == "vllm:inter_token_latency_seconds")
    count = next(s.value for s in itl.samples if s.name.endswith("_count"))
    assert count == 20_000  # every gap, each 1 ms
