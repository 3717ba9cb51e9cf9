"""A long run's memory: histograms within 0.1% of exact, a phase folded record by record that agrees with the
exact summary, and a run that holds at most its records_in_memory however long it goes."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.scenario import SLO
from harness.records import RecordWriter, RequestRecord
from harness.stats.keep import PhaseKeep, RunSample
from harness.stats.metrics import distribution
from harness.stats.phase import fold_phase, phase_stats
from harness.stats.schema import Distribution
from harness.stats.sketch import histogram_of

MS = 1_000_000


def close_to(exact: Distribution, approx: Distribution, rel: float = 1e-3) -> None:
    """Count, mean, std, min and max exact (to float rounding); percentiles within `rel`."""
    a, b = exact.to_json(), approx.to_json()
    assert a["count"] == b["count"]
    for key in ("mean", "std", "min", "max"):
        assert b[key] == pytest.approx(a[key], rel=1e-9, abs=1e-9), key
    for key in ("p50", "p90", "p95", "p99", "p99.9"):
        assert b[key] == pytest.approx(a[key], rel=rel, abs=1e-6), key


@pytest.mark.parametrize("values", [
    np.random.default_rng(1).lognormal(17, 1, 50_000),  # TTFT-like, ~24 ms median with a long tail
    np.random.default_rng(2).exponential(2e7, 20_001),
    np.random.default_rng(3).normal(0, 1e6, 5_000),  # schedule lag on a shifted clock: both signs
    np.array([7.0]),
    np.full(1000, 5e6),  # a constant: every percentile is the value itself
])
def test_a_histogram_reports_percentiles_within_a_tenth_of_a_percent(values: np.ndarray) -> None:
    close_to(distribution(values), histogram_of(values.tolist()))


def _phase(n: int, seed: int = 0) -> list[RequestRecord]:
    """n requests 20 ms apart, each 16 chunks after a TTFT of 30–300 ms; 3% fail, 1% cancelled; ended order."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        intended = i * 20 * MS
        sent = intended + int(rng.uniform(0, 2 * MS))
        r = RequestRecord(f"r{i}", "p", i, 64, 16, intended, sent_ns=sent)
        first = sent + int(rng.uniform(30, 300) * MS)
        r.chunk_ns = (first + np.cumsum([0, *rng.uniform(8, 30, 15) * MS]).astype(np.int64)).tolist()
        r.first_token_ns, r.last_token_ns, r.end_ns = first, r.chunk_ns[-1], r.chunk_ns[-1] + MS
        r.first_content_ns = first
        r.prompt_tokens, r.completion_tokens = 64 + int(rng.integers(-1, 2)), 16
        roll = rng.uniform()
        if roll < 0.03:
            r.status, r.reason, r.http_status = "http_error", "HTTP 503 server_error", 503
        elif roll < 0.04:
            r.status, r.reason = "cancelled", "stopped"
        out.append(r)
    return sorted(out, key=lambda r: r.end_ns)


def _folded(records: list[RequestRecord], cap: int, slo: SLO, warmup_s: float, cooldown_s: float,
            ) -> tuple[PhaseKeep, int]:
    keep = PhaseKeep(slo, cap, warmup_s, cooldown_s)
    most = 0
    for rec in records:
        keep.add(rec)
        most = max(most, len(keep.held))
    keep.close()
    return keep, most


def test_a_phase_folded_record_by_record_agrees_with_its_exact_summary() -> None:
    slo, records = SLO(ttft_ms=200, tpot_ms=25), _phase(6000)
    exact = phase_stats(records, slo, warmup_s=5, cooldown_s=5)
    keep, _ = _folded(records, 500, slo, 5, 5)
    assert keep.let_go is not None and keep.held == []
    fold, span = keep.let_go
    folded, _ = fold_phase([], slo, warmup_s=5, cooldown_s=5, fold=fold, span=span)
    assert not fold.exact
    # Every count, window, rate, token sum and goodput exactly as with every record in hand.
    for field in ("requests", "window", "load", "throughput", "goodput", "tokens", "whole_run", "connections"):
        assert getattr(folded, field) == getattr(exact, field), field
    for name in ("ttft", "ttft_from_intended", "itl", "chunk_gap", "tpot", "e2e", "schedule_lag"):
        close_to(getattr(exact.latency_ms, name), getattr(folded.latency_ms, name))
    close_to(exact.latency_by_status_ms.errored.duration, folded.latency_by_status_ms.errored.duration)
    assert folded.latency_by_status_ms.cancelled.count == exact.latency_by_status_ms.cancelled.count > 0


def test_a_phase_holds_the_same_few_records_however_long_it_runs() -> None:
    slo = SLO(ttft_ms=200)
    # 5 s warm-up and 5 s cool-down at 50 req/s: ~250 records each, whatever the phase's length.
    _, short = _folded(_phase(3000), 300, slo, 5, 5)
    _, long = _folded(_phase(15000), 300, slo, 5, 5)
    assert long <= short + 10 and long < 1200


def test_under_its_cap_a_phase_keeps_every_record_and_stays_exact() -> None:
    slo, records = SLO(), _phase(800)
    keep, _ = _folded(records, 1000, slo, 0, 0)
    assert keep.let_go is None and len(keep.held) == 800
    assert fold_phase(keep.held, slo)[0] == phase_stats(records, slo)


def test_a_run_sample_keeps_one_record_in_a_power_of_two_past_its_cap() -> None:
    sample = RunSample(1000)
    records = _phase(5000)
    for rec in records:
        sample.add(rec)
    assert sample.every == 8 and sample.over and len(sample.records) <= 1000
    assert [r.request_id for r in sample.records] == [r.request_id for r in records[::8]]


def test_a_writer_reads_its_records_back_after_its_folder_is_deleted(tmp_path) -> None:
    import shutil

    run_dir = tmp_path / "run"
    writer = RecordWriter(run_dir)
    for rec in _phase(20):
        writer.write(rec)
    writer.flush()
    shutil.rmtree(run_dir)
    back = list(writer.read_back())
    writer.close()
    assert sorted(r.request_id for r in back) == sorted(f"r{i}" for i in range(20))


def test_answers_whose_usage_disagrees_with_their_chunks_are_named_in_the_phase() -> None:
    from harness.config.scenario import parse_scenario
    from harness.stats.summary import phase_warnings

    scenario = parse_scenario({"name": "s", "phases": [{"name": "p", "load": {"type": "batch", "size": 1}}]}, "s")
    records = _phase(40)
    agree = phase_stats(records, SLO()).tokens
    assert not any("usage" in w for w in phase_warnings(scenario, agree))
    for r in [r for r in records if r.status == "ok"][:5]:
        r.completion_tokens = 64  # 16 chunks, usage says 64: usage decides, and the phase says so
    words = phase_warnings(scenario, phase_stats(records, SLO()).tokens)
    assert any(w.startswith("5 ok answers carried another number of token chunks") for w in words), words
