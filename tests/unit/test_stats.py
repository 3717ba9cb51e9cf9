import pytest

from harness.config.scenario import SLO
from harness.stats.metrics import (
    distribution,
    e2e_ns,
    in_flight,
    itl_samples_ns,
    tpot_ns,
    ttft_from_intended_ns,
    ttft_ns,
)
from tests.helpers import MS, phase_json, rec


def test_per_request_definitions() -> None:
    r = rec(intended=0, sent=5, chunks=[105, 115, 125, 145], completion=4)
    assert ttft_ns(r) == 100 * MS
    assert ttft_from_intended_ns(r) == 105 * MS
    assert e2e_ns(r) == 140 * MS
    assert tpot_ns(r) == pytest.approx(40 * MS / 3)
    assert itl_samples_ns(r) == [10 * MS, 10 * MS, 20 * MS]


def test_single_token_request_has_no_tpot_or_itl() -> None:
    r = rec(0, 0, [50], completion=1)
    assert tpot_ns(r) is None
    assert itl_samples_ns(r) == []


def test_itl_is_token_normalised_when_chunks_carry_several_tokens() -> None:
    # 3 chunks, 5 tokens: the first chunk's token opens the stream, then 4 tokens over 2 gaps.
    r = rec(0, 0, [100, 120, 160], completion=5)
    assert itl_samples_ns(r) == [10 * MS, 10 * MS, 20 * MS, 20 * MS]
    assert r.token_mismatch
    assert tpot_ns(r) == pytest.approx(60 * MS / 4)


def test_output_tokens_fall_back_to_chunk_count_and_are_flagged_estimated() -> None:
    r = rec(0, 0, [10, 20, 30])
    assert r.output_tokens == 3 and r.tokens_estimated and not r.token_mismatch


def test_distribution_percentiles_are_exact() -> None:
    d = distribution([i * MS for i in range(1, 101)])  # 1..100 ms
    assert d.count == 100
    assert d.min == 1.0 and d.max == 100.0
    assert d.mean == pytest.approx(50.5)
    assert d.p50 == pytest.approx(50.5)
    assert d.p99 == pytest.approx(99.01)
    assert d.to_json()["p99.9"] == pytest.approx(99.901)
    assert distribution([]).p50 is None


def test_phase_summary_counts_rates_and_goodput() -> None:
    records = [
        rec(0, 1, [101, 111, 121], completion=3, idx=0),        # ttft 100, tpot 10
        rec(100, 100, [700, 710, 720], completion=3, idx=1),    # ttft 600: misses the 500 ms SLO
        rec(200, 203, [303, 403, 503], completion=3, idx=2),    # tpot 100: misses the 50 ms SLO
        rec(300, 300, [], status="http_error", idx=3),
    ]
    records[3].reason = "HTTP 503 server_error"
    records[3].end_ns = 1000 * MS  # the window runs from t=0 to t=1 s
    s = phase_json(records, SLO(ttft_ms=500, tpot_ms=50))
    assert s["requests"]["ok"] == 3 and s["requests"]["failed"] == 1
    assert s["requests"]["by_status"]["http_error"] == 1
    assert s["requests"]["failure_reasons"] == {"HTTP 503 server_error": 1}
    assert s["window"]["duration_s"] == pytest.approx(1.0)
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(9.0)
    assert s["throughput"]["requests_per_s"] == pytest.approx(3.0)
    assert s["goodput"]["requests_per_s"] == pytest.approx(1.0)
    assert s["goodput"]["fraction"] == pytest.approx(0.25)
    assert s["latency_ms"]["ttft"]["max"] == pytest.approx(600.0)
    assert s["latency_ms"]["schedule_lag"]["max"] == pytest.approx(3.0)
    assert s["client_limited"] is False


def test_schedule_lag_above_bound_marks_run_client_limited() -> None:
    records = [rec(i * 10, i * 10 + 8, [i * 10 + 50], completion=1, idx=i) for i in range(10)]
    assert phase_json(records, SLO(), lag_bound_ms=5.0)["client_limited"] is True
    assert phase_json(records, SLO(), lag_bound_ms=10.0)["client_limited"] is False


def test_batch_summary_times_each_batch_from_send_to_last_completion() -> None:
    records = [rec(0, 0, [100, 200], completion=2, batch=0, idx=0), rec(0, 0, [100, 400], completion=2, batch=0,
               idx=1), rec(500, 500, [600, 700], completion=2, batch=1, idx=2)]
    b = phase_json(records, SLO())["batches"]
    assert b["count"] == 2
    assert b["batch_time_ms"]["max"] == pytest.approx(400.0)
    assert b["batch_time_ms"]["min"] == pytest.approx(200.0)
    assert b["output_tokens_per_s_mean"] == pytest.approx((4 / 0.4 + 2 / 0.2) / 2)


def test_fixed_batch_send_spread_is_judged_against_the_batch_time() -> None:
    # 8 ms of send spread in a 1 s batch is under 2% of it: not client-limited; in a 0.2 s batch it is.
    slow = [rec(0, 8 * (i % 2), [1000], completion=1, batch=0, idx=i) for i in range(10)]
    fast = [rec(0, 8 * (i % 2), [200], completion=1, batch=0, idx=i) for i in range(10)]
    assert phase_json(slow, SLO())["client_limited"] is False
    limited = phase_json(fast, SLO())
    assert limited["client_limited"] is True
    assert limited["client_limited_reason"] == "schedule lag p99 8.0 ms > 5.0 ms"


def test_warmup_and_cooldown_are_excluded_from_the_measurement_window() -> None:
    # One request intended every 100 ms for 10 s, each streaming 10 tokens 10 ms apart from +50 ms.
    records = [rec(i * 100, i * 100, [i * 100 + 50 + 10 * k for k in range(10)], completion=10, idx=i)
               for i in range(100)]
    records[0].chunk_ns = [c + 900 * MS for c in records[0].chunk_ns]  # a slow first request (cold start)
    records[0].first_token_ns, records[0].last_token_ns = records[0].chunk_ns[0], records[0].chunk_ns[-1]
    records[0].first_content_ns = records[0].first_token_ns
    records[0].end_ns = records[0].last_token_ns
    whole = phase_json(records, SLO())
    trimmed = phase_json(records, SLO(), warmup_s=1.0, cooldown_s=1.0)
    assert whole["latency_ms"]["ttft"]["max"] == pytest.approx(950.0)
    assert trimmed["latency_ms"]["ttft"]["max"] == pytest.approx(50.0)  # the cold start is warm-up
    assert trimmed["requests"]["total"] == 81  # intended in [1 s, 9.04 s]: requests 10..90
    assert trimmed["window"]["duration_s"] == pytest.approx(8.04)
    # 100 tokens/s streamed throughout: the window sees the steady rate.
    assert trimmed["throughput"]["output_tokens_per_s"] == pytest.approx(100.0, rel=0.02)
    assert trimmed["whole_run"]["requests"] == 100 and trimmed["whole_run"]["ok"] == 100
    assert trimmed["whole_run"]["throughput"]["output_tokens_per_s"] == pytest.approx(1000 / 10.04, rel=1e-6)


def test_realised_prompt_lengths_are_compared_with_the_requested_ones() -> None:
    a, b, c = (rec(0, 0, [10, 20], completion=2, idx=i) for i in range(3))
    a.prompt_tokens, b.prompt_tokens = 100, 112  # requested 100 each; c reported nothing
    tokens = phase_json([a, b, c], SLO())["tokens"]
    assert tokens["prompt_reported"] == 2 and tokens["prompt_mismatched"] == 1
    assert tokens["prompt_diff_mean"] == pytest.approx(6.0) and tokens["prompt_diff_max_abs"] == 12


def test_latencies_are_split_by_status() -> None:
    records = [
        rec(0, 0, [100, 110, 120], completion=3, idx=0),  # ok: TTFT 100, e2e 120
        rec(0, 10, [40, 60], completion=2, status="ok", idx=1),  # ok: TTFT 30, e2e 50
        rec(0, 0, [300], status="bad_stream", idx=2),  # broke after one token: TTFT 300
        rec(0, 5, [], status="http_error", idx=3),  # refused at once
        rec(0, 0, [70, 80, 90], status="cancelled", idx=4),  # cut off by the stop
    ]
    records[3].end_ns = 25 * MS  # the error response came back 20 ms after sending
    records[4].end_ns = 95 * MS
    split = phase_json(records, SLO())["latency_by_status_ms"]
    assert {g: split[g]["count"] for g in split} == {"ok": 2, "errored": 2, "cancelled": 1}
    assert split["ok"]["ttft"]["min"] == 30 and split["ok"]["ttft"]["max"] == 100
    assert split["ok"]["e2e"]["mean"] == pytest.approx(85)
    # Two errored requests, only one of which saw a token; both have a duration.
    assert split["errored"]["ttft"]["count"] == 1 and split["errored"]["ttft"]["max"] == 300
    assert sorted([split["errored"]["duration"]["min"], split["errored"]["duration"]["max"]]) == [20, 300]
    assert split["errored"]["output_tokens"] == 1
    assert split["cancelled"]["duration"]["max"] == 95 and split["cancelled"]["itl"]["count"] == 2
    # The headline latencies stay the ok requests' alone.
    whole = phase_json(records, SLO())["latency_ms"]
    assert whole["ttft"] == split["ok"]["ttft"]


def test_requests_in_flight_step_up_at_send_and_down_at_end() -> None:
    a = rec(0, 0, [10, 50], idx=0)  # in flight 0–50 ms
    b = rec(0, 20, [30, 40], idx=1)  # 20–40 ms
    c = rec(0, 50, [60, 70], idx=2)  # 50–70 ms: sent as a ends
    never = rec(0, 0, [], status="cancelled", idx=3)
    never.sent_ns = None  # cancelled before sending: never in flight
    times, counts = in_flight([a, b, c, never])
    assert list(times // MS) == [0, 20, 40, 50, 50, 70]
    assert list(counts) == [1, 2, 1, 0, 1, 0]


def test_chunk_gaps_are_kept_apart_from_token_normalised_itl_and_answer_text_from_reasoning() -> None:
    r = rec(0, 0, [100, 120, 160], completion=5, idx=0)  # 3 chunks carrying 5 tokens
    r.first_content_ns = 120 * MS  # the first chunk was reasoning text
    lat = phase_json([r], SLO())["latency_ms"]
    assert (lat["chunk_gap"]["count"], lat["chunk_gap"]["min"], lat["chunk_gap"]["max"]) == (2, 20, 40)
    assert lat["itl"]["count"] == 4 and lat["itl"]["mean"] == pytest.approx(15)
    assert lat["ttft"]["p50"] == 100 and lat["ttft_answer"]["p50"] == 120


def test_throughput_counts_what_the_stream_carried_not_what_usage_claims() -> None:
    liar = rec(0, 0, [100, 200, 300], completion=16, idx=0)  # usage claims 16 tokens for 3 chunks
    s = phase_json([liar], SLO())
    assert s["tokens"]["output"] == 3 and s["tokens"]["mismatched"] == 1
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(3 / 0.3)
    exact = rec(0, 0, [100, 200, 300], completion=6, idx=1)
    exact.chunk_tokens = [1, 2, 3]  # continuous usage: the server said what each chunk carried
    s = phase_json([exact], SLO())
    assert s["tokens"]["output"] == 6 and s["throughput"]["output_tokens_per_s"] == pytest.approx(6 / 0.3)


def test_connections_opened_in_the_phase_are_counted_and_a_dropped_syn_is_named() -> None:
    from harness.stats.phase import phase_stats
    from harness.stats.summary import connect_warnings

    records = [rec(0, 2, [50], idx=i) for i in range(4)]
    assert phase_stats(records, SLO()).connections is None  # every request on a pooled connection
    for r, ms in zip(records, (1.5, 1003.0, None, 2.5), strict=True):
        r.connect_ms = ms
    connections = phase_stats(records, SLO()).connections
    assert connections is not None and connections.opened == 3 and connections.slow == 1
    assert connections.connect_ms.max == pytest.approx(1003.0) and connections.connect_ms.p50 == pytest.approx(2.5)
    (warning,) = connect_warnings(connections)
    assert "1 of 3 connections" in warning and "dropped SYNs" in warning
    records[1].connect_ms = 999.0
    assert connect_warnings(phase_stats(records, SLO()).connections) == []
