import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.sim.metrics import ITL_BUCKETS, BulkHistogram


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    text = generate_latest(registry).decode()
    return {(s.name, s.labels.get("le", "")): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if not s.name.endswith("_created")}


def test_bulk_histogram_counts_exactly_like_prometheus_client() -> None:
    values = np.random.default_rng(1).exponential(0.05, 2000)
    values[:6] = [0.01, 0.025, 0.0, 100.0, 0.05, 80.0]  # on the bucket edges and beyond the last
    plain, bulk = CollectorRegistry(), CollectorRegistry()
    h = Histogram("itl_seconds", "d", ["m"], buckets=ITL_BUCKETS, registry=plain)
    for v in values:
        h.labels("a").observe(float(v))
    b = BulkHistogram("itl_seconds", "d", {"m": "a"}, ITL_BUCKETS)
    bulk.register(b)
    b.observe_many(values[:700])
    b.observe_many(values[700:])
    expected, got = _samples(plain), _samples(bulk)
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
