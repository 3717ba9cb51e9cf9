import io

from harness.clock import NS_PER_MS, NS_PER_S, FakeClock
from harness.records import RequestRecord
from harness.run.progress import Progress


def done(i: int, status: str = "ok", ttft_ms: int = 20, tokens: int = 10) -> RequestRecord:
    rec = RequestRecord(f"r{i}", "p", i, 8, tokens, 0, sent_ns=0, first_token_ns=ttft_ms * NS_PER_MS,
                        completion_tokens=tokens, status=status)  # type: ignore[arg-type]
    rec.chunk_ns = [ttft_ms * NS_PER_MS + k for k in range(tokens)]
    return rec


def test_progress_line_reports_counts_rates_and_median_ttft() -> None:
    clock = FakeClock()
    progress = Progress(clock, io.StringIO(), sent=lambda: 7)
    progress.begin_phase("interactive")
    for i, ttft in enumerate((10, 20, 30, 40)):
        progress.record(done(i, ttft_ms=ttft))
    progress.record(done(9, status="timeout"))
    clock.advance_to(2 * NS_PER_S)
    assert progress.line() == ("[interactive]    2.0 s  sent 7  done 5  2.5 req/s  20 tok/s  TTFT p50 25.0 ms  "
                               "errors 1")
    progress.begin_phase("batch")
    assert "done 0" in progress.line() and "TTFT p50 -" in progress.line()
