"""What the live exporter costs per finished request, on the harness's event loop (its only hot-path part).

Feeds N synthetic records of 128 token-bearing chunks (127 ITL samples each) to `LiveMetrics.record`, and
times a scrape (OpenMetrics exposition) of the result. No network.

    .venv/bin/python bench/exporter.py [--requests 20000]
"""

from __future__ import annotations

import argparse
import time

from prometheus_client.openmetrics.exposition import generate_latest

from harness.records import RequestRecord
from harness.run.exporter import LiveMetrics


def records(n: int, tokens: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        rec = RequestRecord(f"run-0-{i}", "p", i, 512, tokens, i * 1_000_000, sent_ns=i * 1_000_000 + 50_000,
                            completion_tokens=tokens, prompt_tokens=512)
        rec.chunk_ns = [rec.intended_ns + 30_000_000 + k * (9_000_000 + (k * 7919 + i) % 2_000_000)
                        for k in range(tokens)]
        rec.first_token_ns, rec.last_token_ns, rec.end_ns = rec.chunk_ns[0], rec.chunk_ns[-1], rec.chunk_ns[-1]
        rec.first_content_ns = rec.first_token_ns  # as the worker sets it: a stream without thinking
        out.append(rec)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    recs = records(args.requests, args.tokens)
    metrics = LiveMetrics("bench")
    metrics.open_phase("p", "bench", 100.0, lambda: args.requests)
    t0 = time.perf_counter()
    for rec in recs:
        metrics.record(rec)
    per = (time.perf_counter() - t0) / len(recs)
    t0 = time.perf_counter()
    text = generate_latest(metrics.registry)  # type: ignore[no-untyped-call]
    scrape = time.perf_counter() - t0
    print(f"record: {per * 1e6:.1f} µs per request of {args.tokens} tokens ({per * 400 * 100:.2f}% of a core "
          f"at 400 req/s); a scrape: {scrape * 1e3:.2f} ms for {len(text):,} bytes")


if __name__ == "__main__":
    main()
