"""The lean client's connection takes a whole HTTP chunk holding one plain token itself, without its HTTP parser
(`H1Connection.data_received`): whatever way the bytes are cut into reads, a stream counts as the parser alone
would count it."""

from __future__ import annotations

import asyncio
import collections
import json
import random
from collections.abc import Iterator

import pytest

from harness.client.belongs import Provenance
from harness.client.h1_connection import Exchange, H1Connection
from harness.client.sse import ChunkReader
from harness.clock import MonotonicClock
from harness.records import RequestRecord
from harness.run.worker import RecordStamper

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
VLLM = {"id": "chatcmpl-a58b976d0b6fc2bfd82f23816fc9ad04", "object": "chat.completion.chunk", "created": 1796333946,
        "model": "meta-llama/Llama-3.1-8B-Instruct", "system_fingerprint": "fp_vllm_0.11.0"}
# Tokens a real stream carries: short and long, an escaped quote and line break (not the short way's), unicode.
TOKENS = [" the", " word", "!", ' "quoted"', "line\nbreak", " caf\u00e9", " a", " b", "", " longer-token-here"]


def event(content: str, finish: str | None = None) -> bytes:
    body = {**VLLM, "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None,
                                 "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def framed(payload: bytes, upper: bool = False) -> bytes:
    size = (b"%X" if upper else b"%x") % len(payload)
    return size + b"\r\n" + payload + b"\r\n"


def stream_chunks(tokens: list[str], upper: bool = False) -> list[bytes]:
    """The HTTP chunks of a stream: one per token event, the finish, the usage, [DONE], the last chunk."""
    usage = b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\n' % len(tokens)
    payloads = [event(t) for t in tokens] + [event("", "length"), usage, b"data: [DONE]\n\n"]
    return [framed(p, upper) for p in payloads] + [b"0\r\n\r\n"]


class _Transport:
    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def replay(reads: list[bytes]) -> tuple[RequestRecord, H1Connection, asyncio.Future[BaseException | None], int]:
    """`reads` through a connection as its event loop hands them in; also how many the connection took itself."""
    loop = asyncio.new_event_loop()
    try:
        conn = H1Connection(collections.deque(), Provenance("chat"))
        conn.transport = _Transport()  # type: ignore[assignment]
        rec = RequestRecord("r", "p", 0, 16, 512, 0)
        done: asyncio.Future[BaseException | None] = loop.create_future()
        conn.exchange = Exchange(rec.request_id, RecordStamper(rec, MonotonicClock()), done, None, ChunkReader())
        taken = 0
        original = ChunkReader.framed

        def counting(reader: ChunkReader, data: bytes) -> bool:
            nonlocal taken
            took = original(reader, data)
            taken += took
            return took

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ChunkReader, "framed", counting)
            for piece in reads:
                conn.data_received(piece)
        return rec, conn, done, taken
    finally:
        loop.close()


def cuts(data: bytes, rng: random.Random) -> Iterator[bytes]:
    at = 0
    while at < len(data):
        step = rng.randint(1, 40)
        yield data[at:at + step]
        at += step


def outcome(reads: list[bytes]) -> tuple[int, bool, bool, str | None, int | None]:
    rec, _, done, _ = replay(reads)
    return (len(rec.chunk_ns), rec.first_token_ns is not None, done.done() and done.result() is None,
            rec.finish_reason, rec.completion_tokens)


def test_a_stream_counts_the_same_read_chunk_by_chunk_cut_anywhere_or_in_one_piece() -> None:
    tokens = TOKENS * 5
    chunks = stream_chunks(tokens)
    one_by_one = replay([HEAD, *chunks])
    whole = b"".join([HEAD, *chunks])
    # A token whose JSON holds no escaped quote is plain (an escaped line break is a byte pair, not a break).
    plain = sum(1 for t in tokens if t and '\\"' not in json.dumps(t))
    assert len(one_by_one[0].chunk_ns) == sum(1 for t in tokens if t)  # every token, none twice
    assert one_by_one[3] == plain - 1  # each plain token after the first was taken without the parser
    assert one_by_one[2].done() and one_by_one[2].result() is None
    expected = outcome([HEAD, *chunks])
    assert outcome([whole]) == expected
    rng = random.Random(48)
    for _ in range(30):
        assert outcome(list(cuts(whole, rng))) == expected


EVENT30 = b'data: {"content":"yyyyyyyy"}\n\n'  # a plain token event of 0x1e bytes


def big_chunk(lead: bytes) -> bytes:
    """A 0x11e-byte chunk whose data starts with `lead`, then EVENT30 and CRLF — which, cut at the wrong place,
    looks like a whole 0x1e-byte chunk of its own — then a comment filling it up."""
    head = lead + EVENT30 + b"\r\n"
    filler = b":" + b"z" * (0x11E - len(head) - 3) + b"\n\n"
    return b"11e\r\n" + head + filler + b"\r\n"


@pytest.mark.parametrize("where", ["inside the size line", "after the size line"])
def test_a_read_that_only_looks_like_a_whole_chunk_is_left_to_the_parser(where: str) -> None:
    first = framed(event(" the")) + framed(event(" word"))
    tail = [framed(event(" end")), framed(b"data: [DONE]\n\n"), b"0\r\n\r\n"]
    if where == "inside the size line":  # "1" ends a read; the next begins "1e\r\n" + EVENT30 + CRLF
        body = big_chunk(b"")
        cut = 1
    else:  # the size line ends a read; the chunk's data begins "1e\r\n" (an SSE line the standard ignores)
        body = big_chunk(b"1e\r\n")
        cut = 5
    assert len(EVENT30) == 0x1E
    trap = body[cut:cut + 4 + len(EVENT30) + 2]
    assert trap == b"1e\r\n" + EVENT30 + b"\r\n"
    rec, _, done, taken = replay([HEAD, first + body[:cut], trap, body[cut + len(trap):], *tail])
    assert done.done() and done.result() is None
    assert len(rec.chunk_ns) == 4  # the, word, the event inside the big chunk, end: as the parser reads it
    assert taken == 1  # only " end", after the parser found the big chunk's end


def test_upper_case_sizes_count_the_same_and_a_stream_after_its_end_is_not_counted() -> None:
    tokens = TOKENS * 3
    assert outcome([HEAD, *stream_chunks(tokens, upper=True)]) == outcome([HEAD, *stream_chunks(tokens)])
    # After [DONE] the request is over: a whole token chunk the server sends on is not counted.
    chunks = stream_chunks([" a", " b"])
    rec, _, _, _ = replay([HEAD, *chunks[:-1], framed(event(" late")), chunks[-1]])
    assert len(rec.chunk_ns) == 2


def test_the_finish_reason_is_read_from_a_chunk_taken_whole() -> None:
    # Some servers put the finish reason on the last token's own chunk, which is plain enough to be taken whole.
    # A server that repeats it on every token's chunk: the last two are taken whole, and kept as they came.
    chunks = [framed(event(t, "stop")) for t in (" a", " b", " c")] + [framed(b"data: [DONE]\n\n"), b"0\r\n\r\n"]
    rec, _, _, taken = replay([HEAD, *chunks])
    assert taken == 2 and len(rec.chunk_ns) == 3
    assert rec.finish_reason == "stop"
