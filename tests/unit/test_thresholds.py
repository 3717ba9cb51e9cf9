import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.config.metric_registry import LATENCIES, REGISTRY, STATISTICS
from harness.config.scenario import SLO, ScenarioError, parse_scenario
from harness.config.thresholds import parse_threshold
from harness.stats.schema import PhaseStats
from harness.stats.thresholds import evaluate, observed
from tests.helpers import phase_json, rec

FRACTIONS = [m.name for m in REGISTRY.values() if m.kind == "fraction"]
RATES = [m.name for m in REGISTRY.values() if m.kind == "rate"]
METRICS = list(REGISTRY)

OPS = st.sampled_from(["<", "<=", ">", ">="])
NUMBERS = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda v: round(v, 3))
MS_PER = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@given(st.sampled_from([f"{n}_{s}" for n in LATENCIES for s in STATISTICS]), OPS, NUMBERS,
       st.sampled_from(list(MS_PER)), NUMBERS)
def test_latency_limits_are_in_ms_and_hold_as_their_operator_says(metric: str, op: str, value: float, unit: str,
                                                                   seen: float) -> None:
    t = parse_threshold(metric, f"{op}{value}{unit}")
    assert t.limit == pytest.approx(value * MS_PER[unit]) and t.kind == "latency"
    expected = {"<": seen < t.limit, "<=": seen <= t.limit, ">": seen > t.limit, ">=": seen >= t.limit}[op]
    assert t.holds(seen) == expected
    assert parse_threshold(metric, t.text) == t  # what summary.json and a saved scenario keep parses the same


@given(st.sampled_from(FRACTIONS), OPS, st.floats(min_value=0, max_value=100, allow_nan=False).map(
    lambda v: round(v, 2)))
def test_fractions_take_a_share_or_a_percentage(metric: str, op: str, percent: float) -> None:
    assert parse_threshold(metric, f"{op}{percent}%").limit == pytest.approx(percent / 100)
    if percent <= 1:
        assert parse_threshold(metric, f"{op} {percent}").limit == pytest.approx(percent)


@given(st.sampled_from(list(METRICS)), st.sampled_from(["500", "<", "=500ms", "<500xs", "<<1", "<1 ms s", "≤5"]))
def test_malformed_limits_are_refused(metric: str, text: str) -> None:
    with pytest.raises(ValueError, match=metric):
        parse_threshold(metric, text)


@pytest.mark.parametrize(("metric", "text", "words"), [
    ("ttft_p98", "<500ms", "did you mean ttft_p99"),
    ("ttft_p99", "<500", "a latency needs a unit"),
    ("error_rate", "<1ms", "a fraction is a share"),
    ("error_rate", "<150%", "at most 1"),
    ("output_tokens_per_s", ">2k", "a rate is a plain number"),
])
def test_errors_name_the_metric_and_the_fix(metric: str, text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_threshold(metric, text)


def test_a_misspelt_threshold_fails_the_scenario_naming_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"^s.yaml: phases\[0\].thresholds: 'itl_p51': unknown metric"):
        parse_scenario({"name": "t", "phases": [{"name": "a", "load": {"type": "batch", "size": 1},
                                                  "thresholds": {"itl_p51": "<30ms"}}]}, "s.yaml")


def test_thresholds_read_the_phase_figures() -> None:
    records = [rec(0, 0, [100 + i, 110 + i, 130 + i], completion=3, idx=i) for i in range(9)]
    records.append(rec(0, 0, [], status="timeout", idx=9))
    stats = PhaseStats.model_validate(phase_json(records, SLO()))
    assert observed("error_rate", stats) == pytest.approx(0.1)
    assert observed("ttft_p50", stats) == pytest.approx(104.0)
    assert observed("ttft_p999", stats) == stats.latency_ms.ttft.p99_9
    assert observed("output_tokens_per_s", stats) == stats.throughput.output_tokens_per_s
    results = evaluate({"ttft_p50": "<100ms", "error_rate": "<=10%"}, {"ttft_p50": "<0.2s"}, stats)
    assert [(r.metric, r.limit, r.passed) for r in results] == [("ttft_p50", "<0.2s", True),
                                                              ("error_rate", "<=10%", True)]
    nothing = PhaseStats.model_validate(phase_json([rec(0, 0, [], status="timeout")], SLO()))
    (none,) = evaluate({"tpot_p99": "<50ms"}, {}, nothing)
    assert none.observed is None and not none.passed  # no data fails: a gate must not pass on silence


def test_every_rate_metric_is_readable() -> None:
    stats = PhaseStats.model_validate(phase_json([rec(0, 0, [10, 20], completion=2)], SLO()))
    assert all(observed(m, stats) is not None for m in RATES)
