"""A reasoning model's stream, as the simulator writes it and the worker reads it: thinking first, then the
answer; both first-token times, and the thinking/answer split by the server's count or by the chunks."""

from __future__ import annotations

import orjson

from harness.client.backend import take
from harness.client.sse import ChunkReader
from harness.clock import FakeClock
from harness.records import RequestRecord
from harness.run.worker import RecordStamper, close
from harness.sim.openai_shapes import ChunkRenderer


def _payloads(frames: bytes) -> list[dict[str, object]]:
    return [orjson.loads(f.removeprefix(b"data: ")) for f in frames.split(b"\n\n") if f]


def _read(pieces: list[bytes], clock: FakeClock) -> RequestRecord:
    rec = RequestRecord("r", "p", 0, 10, 250, 0, sent_ns=0)
    stamper, reader = RecordStamper(rec, clock), ChunkReader()
    for piece in pieces:
        clock._now += 10
        take(reader, stamper, piece)
    close(rec, clock.now_ns())
    return rec


def test_the_first_n_tokens_stream_as_thinking_and_the_turn_may_fall_inside_one_write() -> None:
    renderer = ChunkRenderer(True, "id", "m", 0, reasoning=3)
    deltas = [p["choices"][0]["delta"] for p in _payloads(renderer.tokens(0, 5))]  # type: ignore[index]
    assert [sorted(d) for d in deltas] == [["reasoning_content"]] * 3 + [["content"]] * 2
    usage = _payloads(renderer.usage(7, 5))[0]["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 3}  # type: ignore[index]
    plain = ChunkRenderer(True, "id", "m", 0)
    assert "completion_tokens_details" not in _payloads(plain.usage(7, 5))[0]["usage"]  # type: ignore[operator]
    assert b"reasoning" not in ChunkRenderer(False, "id", "m", 0, reasoning=3).tokens(0, 5)  # completions: none


def test_the_worker_stamps_both_first_token_times_and_counts_the_thinking() -> None:
    renderer = ChunkRenderer(True, "id", "m", 0, reasoning=4)
    pieces = [renderer.tokens(i, 1) for i in range(6)] + [renderer.usage(10, 6), b"data: [DONE]\n\n"]
    rec = _read(pieces, FakeClock())
    assert rec.status == "ok" and len(rec.chunk_ns) == 6
    assert rec.first_token_ns == 10 and rec.first_content_ns == 50  # the fifth write is the first answer token
    assert rec.reasoning_tokens == 4 and rec.completion_tokens == 6


def test_without_a_usage_count_the_thinking_chunks_are_counted() -> None:
    renderer = ChunkRenderer(True, "id", "m", 0, reasoning=2)
    rec = _read([renderer.tokens(0, 1), renderer.tokens(1, 1), renderer.tokens(2, 1), b"data: [DONE]\n\n"],
                FakeClock())
    assert rec.reasoning_tokens == 2 and rec.first_content_ns == 30
