"""The floor under the client's cost per streamed token: one socket read, no parsing.

When a server writes every event on its own (vLLM, llama.cpp, TGI), a client that keeps up reads each token
with its own read: epoll, recv, and a protocol callback, before any parsing. Here a server process pinned
to one core writes a 220-byte message (the size of a chat chunk) to each of 64 connections per turn of its
loop, and a client pinned to the other core only counts what it reads: its CPU per read is what the event
loop and the kernel cost, the part of the harness's per-token cost no parser change can remove. Run with
uvloop and with asyncio's own loop. Traffic stays on 127.0.0.1; each run lasts `SECONDS`.

    .venv/bin/python bench/read_floor.py
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop

MESSAGE = b"x" * 220
STREAMS = 64
SECONDS = 4.0


def _run(uv: bool, main: Coroutine[Any, Any, None]) -> None:
    (uvloop.run if uv else asyncio.run)(main)


def _server(ports: mp.Queue[int], uv: bool) -> None:
    os.sched_setaffinity(0, {(os.cpu_count() or 1) - 1})

    async def main() -> None:
        writers: list[asyncio.StreamWriter] = []

        async def handle(_: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            writers.append(w)
            await asyncio.sleep(SECONDS + 10)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ports.put(server.sockets[0].getsockname()[1])
        while len(writers) < STREAMS:
            await asyncio.sleep(0.01)
        end = time.monotonic() + SECONDS + 1.5
        while time.monotonic() < end:
            for w in writers:
                w.transport.write(MESSAGE)
            await asyncio.sleep(0)

    _run(uv, main())


class _Counter(asyncio.Protocol):
    reads = 0
    nbytes = 0

    def data_received(self, data: bytes) -> None:
        _Counter.reads += 1
        _Counter.nbytes += len(data)


async def _client(port: int, report: Callable[[int, float, float], None]) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(STREAMS):
        await loop.create_connection(_Counter, "127.0.0.1", port)
    await asyncio.sleep(0.5)
    _Counter.reads = _Counter.nbytes = 0
    cpu0 = time.process_time()
    await asyncio.sleep(SECONDS)
    report(_Counter.reads, _Counter.nbytes / len(MESSAGE), time.process_time() - cpu0)


def measure(uv: bool) -> None:
    ports: mp.Queue[int] = mp.Queue()
    server = mp.Process(target=_server, args=(ports, uv))
    server.start()
    try:
        port = ports.get(timeout=30)
        os.sched_setaffinity(0, {0})

        def report(reads: int, messages: float, cpu_s: float) -> None:
            print(f"{'uvloop' if uv else 'asyncio':>8}: {reads:>7} reads, {messages / reads:.2f} messages a read, "
                  f"{cpu_s / reads * 1e6:5.2f} µs of CPU a read, {cpu_s / messages * 1e6:5.2f} µs a message",
                  flush=True)

        _run(uv, _client(port, report))
    finally:
        server.terminate()
        server.join()


if __name__ == "__main__":
    for uv in (True, False, True, False):
        measure(uv)
