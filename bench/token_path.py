"""Where the harness's CPU per streamed token goes, layer by layer, on a byte-exact replay (issue 29's profile).

A stream as a one-token-per-write server sends it (`bench/ref/sse_server.js`: an HTTP chunk per SSE event, OpenAI
chat chunks) is replayed, one event per socket read, through the lean client's connection protocol
(`harness.client.h1_connection.H1Connection.data_received`), and the same replay is timed with each layer above
it cut off:

    httptools        the HTTP parser alone (body callbacks that do nothing)
    + SSE framing    SSEDecoder.feed on each body piece
    + interpret      the chunk fast path (a full orjson parse for what it does not recognise)
    + stamping       RecordStamper.chunks: a clock read and the token's time appended to the record
    short way        what the client runs instead for one plain token alone in its read (`take`)
    = data_received  the whole per-read path the event loop calls

Each step's difference is that layer's cost. What lies below `data_received` — the event loop's wake-up, the
`recv` system call and the kernel's TCP work — is measured by `bench/read_floor.py` (an empty protocol under
the same read pattern). Also printed: the cost of a clock read.

    .venv/bin/python bench/token_path.py [--tokens 200000] [--shape plain|vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import time
from collections.abc import Callable
from typing import Any

import httptools

from harness.client.backend import take
from harness.client.belongs import Provenance
from harness.client.chat_chunk import interpret
from harness.client.h1_connection import Exchange, H1Connection
from harness.client.sse import ChunkReader, SSEDecoder
from harness.clock import MonotonicClock
from harness.records import RequestRecord
from harness.run.worker import RecordStamper

SHAPES: dict[str, dict[str, Any]] = {
    "plain": {"id": "chatcmpl-ref", "object": "chat.completion.chunk", "created": 0, "model": "ref"},
    # vLLM's own event head (bench/ref/sse_server.js --shape vllm), ~280 bytes an event with its model's name.
    "vllm": {"id": "chatcmpl-a58b976d0b6fc2bfd82f23816fc9ad04", "object": "chat.completion.chunk",
             "created": 1796333946, "model": "meta-llama/Llama-3.1-8B-Instruct",
             "system_fingerprint": "fp_vllm_0.11.0"},
}
SHAPE = ["plain"]


def event(content: str, finish: str | None = None) -> bytes:
    body = {**SHAPES[SHAPE[0]],
            "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: keep-alive\r\n\r\n")


def stream_reads(tokens: int) -> list[bytes]:
    """A response as one read per write: the head, one HTTP chunk per token event, the end."""
    reads = [HEAD] + [http_chunk(event(" the" if k % 7 == 0 else " word")) for k in range(tokens)]
    reads += [http_chunk(event("", "length")), http_chunk(b"data: [DONE]\n\n"), b"0\r\n\r\n"]
    return reads


class _Transport:
    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def per_token_us(tokens: int, body: Callable[[], Callable[[bytes], Any]]) -> float:
    """µs of CPU per token for the replay through httptools, each body piece handed to `body()`'s callable."""
    reads = stream_reads(512)
    rounds = max(1, tokens // 512)

    class Proto:
        def __init__(self) -> None:
            self.on_body = body()

    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        parser = httptools.HttpResponseParser(Proto())
        for piece in reads:
            parser.feed_data(piece)
    return (time.process_time() - start) / (rounds * 512) * 1e6


def whole_path_us(tokens: int) -> float:
    """µs per token through `H1Connection.data_received`, as the event loop calls it."""
    reads = stream_reads(512)
    rounds = max(1, tokens // 512)
    loop = asyncio.new_event_loop()
    clock = MonotonicClock()
    gc.collect()
    start = time.process_time()
    for _ in range(rounds):
        conn = H1Connection(collections.deque(), Provenance("chat"))
        conn.transport = _Transport()  # type: ignore[assignment]
        rec = RequestRecord("r", "p", 0, 16, 512, 0)
        conn.exchange = Exchange(rec.request_id, RecordStamper(rec, clock), loop.create_future(), None, ChunkReader())
        for piece in reads:
            conn.data_received(piece)
    elapsed = time.process_time() - start
    loop.close()
    return elapsed / (rounds * 512) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--shape", choices=tuple(SHAPES), default="plain",
                        help="the event replayed: a short one, or vLLM's (its id, time, model, system_fingerprint)")
    args = parser.parse_args()
    n, SHAPE[0] = args.tokens, args.shape
    clock = MonotonicClock()

    def stamping() -> Callable[[bytes], Any]:
        reader = ChunkReader()
        stamper = RecordStamper(RequestRecord("r", "p", 0, 16, 512, 0), clock)
        return lambda piece: stamper.chunks(reader.read(piece))

    def short_way() -> Callable[[bytes], Any]:
        reader = ChunkReader()
        stamper = RecordStamper(RequestRecord("r", "p", 0, 16, 512, 0), clock)
        return lambda piece: take(reader, stamper, piece)

    def framing_interpret() -> Callable[[bytes], Any]:
        decoder = SSEDecoder()
        return lambda piece: [interpret(p) for p in decoder.feed(piece)]

    steps = [("httptools", lambda: lambda piece: None), ("+ SSE framing", lambda: SSEDecoder().feed),
             ("+ interpret", framing_interpret), ("+ stamping", stamping)]
    previous = 0.0
    print(f"per token, one {SHAPE[0]} event ({len(event(' word'))} bytes) per read, {n:,} tokens replayed "
          f"({time.strftime('%Y-%m-%d')}):")
    for name, body in steps:
        total = min(per_token_us(n, body) for _ in range(3))
        print(f"  {name:16} {total:5.2f} µs cumulative, {total - previous:+5.2f} µs this layer")
        previous = total
    short = min(per_token_us(n, short_way) for _ in range(3))
    print(f"  {'short way':16} {short:5.2f} µs cumulative: httptools, then `take` (one plain token alone in its "
          "read: ChunkReader.plain + RecordStamper.token, the rest as above)")
    previous = short
    whole = min(whole_path_us(n) for _ in range(3))
    print(f"  {'= data_received':16} {whole:5.2f} µs (the connection's bookkeeping {whole - previous:+.2f})")
    start = time.process_time()
    for _ in range(1_000_000):
        time.monotonic_ns()
    print(f"  a clock read: {(time.process_time() - start) * 1e3:.0f} ns")
    print("  below data_received (event-loop wake-up, recv, kernel): bench/read_floor.py")


if __name__ == "__main__":
    main()
