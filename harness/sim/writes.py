"""How a stream's events reach its socket: a step's at once, or each in its own write.

vLLM with its default stream interval of 1, llama.cpp's server and TGI write every SSE event with its
own socket write, and the next only after the event loop has turned: a client then reads each token on
its own, and pays its per-read cost once per token. The simulator's engine releases a step's tokens
together; `token` mode keeps that timing and spreads the writes, one event per loop turn per stream.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class StreamWrites:
    """One response body, chunk-encoded, on `transport`; `on_end` runs once its last event is written."""

    __slots__ = ("_last_queued", "_loop", "_on_end", "_pending", "_per_event", "_queue", "_transport")

    def __init__(self, transport: asyncio.WriteTransport, per_event: bool, on_end: Callable[[], None]) -> None:
        self._transport = transport
        self._per_event = per_event
        self._on_end = on_end
        self._queue: deque[bytes] = deque()
        self._pending = False  # a write of the queue is scheduled
        self._last_queued = False
        self._loop = asyncio.get_running_loop()

    @property
    def closed(self) -> bool:
        return self._transport.is_closing()

    def send(self, events: list[bytes], last: bool = False) -> None:
        """`events` (SSE frames) in order; `last`: the stream ends with them."""
        if not self._per_event:
            self._write(b"".join(events))
            if last:
                self._on_end()
            return
        self._queue.extend(events)
        self._last_queued = self._last_queued or last
        if not self._pending:
            self._next()

    def send_one(self, event: bytes) -> None:
        """One event, the stream going on: a token mid-answer, the call made for nearly every token."""
        if self._queue or self._pending:
            self._queue.append(event)
            if not self._pending:
                self._next()
            return
        if self._transport.is_closing():
            self._on_end()
            return
        self._write(event)

    def _next(self) -> None:
        self._pending = False
        if self._transport.is_closing():
            self._queue.clear()
            self._on_end()
            return
        if self._queue:
            self._write(self._queue.popleft())
        if self._queue:
            self._pending = True
            self._loop.call_soon(self._next)
        elif self._last_queued:
            self._on_end()

    def _write(self, frames: bytes) -> None:
        self._transport.write(b"%x\r\n%b\r\n" % (len(frames), frames))
