"""Memory a run keeps per request: 10,000 records as the harness holds them for the final report, measured with
tracemalloc, with their token times as a list of ints and compacted (`harness.records.compact`, done when a
record closes). No network.

    .venv/bin/python bench/record_memory.py
"""

from __future__ import annotations

import time
import tracemalloc

from harness.records import RequestRecord, compact

COUNT = 10_000


def record(i: int, tokens: int) -> RequestRecord:
    now = time.monotonic_ns()
    rec = RequestRecord(f"af653a9c-0-{i}", "interactive", i, 64, tokens, now, sent_ns=now + 1000, first_token_ns=now,
                        first_content_ns=now, last_token_ns=now, end_ns=now, prompt_tokens=64,
                        completion_tokens=tokens, http_status=200, finish_reason="length")
    rec.chunk_ns = [now + k * 10_000_000 for k in range(tokens)]
    return rec


def per_record(tokens: int, compacted: bool) -> float:
    tracemalloc.start()
    kept = [record(i, tokens) for i in range(COUNT)]
    if compacted:
        for rec in kept:
            compact(rec)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / COUNT


def main() -> None:
    for tokens in (32, 128, 512):
        before, after = per_record(tokens, False), per_record(tokens, True)
        print(f"{tokens:4} tokens: {before:7,.0f} B a record as lists, {after:7,.0f} B compacted "
              f"({before / after:.1f}x less); a million records {after * 1e6 / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
