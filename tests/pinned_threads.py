"""A loopback HTTP/1.1 server with a fixed pool of connection threads, as cpp-httplib runs llama-server's: an
accepted connection waits until one of `threads` is free, and a thread stays with its connection, idle
between requests, until the connection has been quiet for `keep_alive_s` (llama-server: 5 s). A client that
pools more idle connections than the server has threads sends requests the server does not read until some
other connection's keep-alive runs out. It streams a short chat completion (one SSE event a write) and answers
`GET /v1/models`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class PinnedThreads:
    threads: int = 4
    keep_alive_s: float = 3.0
    tokens: int = 4
    served: int = 0  # connections that got a thread

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        async with self._pool:
            self.served += 1
            try:
                while await self._one(reader, writer):
                    pass
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """One request on a kept-alive connection; False when it stayed quiet for `keep_alive_s` or closed."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.keep_alive_s)
        except TimeoutError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(v) for k, _, v in (x.partition(":") for x in lines[1:])
                       if k.strip().lower() == "content-length"), 0)
        await reader.readexactly(length)
        if lines[0].startswith("GET"):
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            return True
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for k in range(self.tokens):
            event = {"choices": [{"index": 0, "delta": {"content": f" w{k}"}, "finish_reason": None}]}
            await self._chunk(writer, b"data: " + json.dumps(event).encode() + b"\n\n")
            await asyncio.sleep(0.002)
        usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": self.tokens}}
        await self._chunk(writer, b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    @staticmethod
    async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        self._pool = asyncio.Semaphore(self.threads)
        self._writers: set[asyncio.StreamWriter] = set()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            server.close()
            for writer in self._writers:  # connections still waiting for a thread, or kept alive: closed here,
                writer.close()  # not by the garbage collector after the loop has gone
            await asyncio.gather(*(w.wait_closed() for w in self._writers), return_exceptions=True)
            await server.wait_closed()
