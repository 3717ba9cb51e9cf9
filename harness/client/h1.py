"""A lean HTTP/1.1 streaming client for the hot path: one asyncio protocol per connection.

aiohttp spends ~13 µs on every streamed event (its body reader wakes the reading task once per
HTTP chunk). Here the connection's protocol hands the chunks of each piece of body straight to the
worker's events inside `data_received`, and the request's task wakes once, at the end: a few µs an
event (`harness.client.h1_connection`). httptools (the parser uvicorn uses) does the HTTP; this module keeps
the connections and turns how each exchange ended into events. It
speaks exactly what the harness needs: POST with a JSON body, keep-alive, chunked or sized
responses, TLS for https. Failures become events, as in `harness.client.aio`.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from urllib.parse import urlsplit

import orjson

from harness.client.backend import (
    WARM_ANSWER_S,
    Endpoint,
    RequestEvents,
    error_message,
    error_reason,
    redirect,
    request_body,
)
from harness.client.belongs import Provenance
from harness.client.h1_connection import Exchange, Expired, H1Connection, ResponseTooLarge, expire
from harness.client.read_window import ReadWindow
from harness.client.urls import path_and_query, under
from harness.errors import BadChunk
from harness.workload.requests import RequestSpec

WARM_AT_ONCE = 64  # handshakes in flight while the pool is opened ahead of a phase


class H1Backend:
    """The `Backend` of the harness on `H1Connection`s, with a keep-alive pool of `max_connections`."""

    def __init__(self, endpoint: Endpoint, max_connections: int, connect_timeout_s: float,
                 request_timeout_s: float, first_token_timeout_s: float | None = None,
                 continuous_usage: bool = False, read_window_s: float = 0.0) -> None:
        url = urlsplit(endpoint.url)
        self.endpoint = endpoint
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.path = path_and_query(endpoint.url)
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_token_timeout_s = first_token_timeout_s if endpoint.streams else None
        self.continuous_usage = continuous_usage
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: collections.deque[H1Connection] = collections.deque()
        self._opened: weakref.WeakSet[H1Connection] = weakref.WeakSet()
        self._provenance = Provenance(endpoint.api)
        self._window = ReadWindow(read_window_s) if read_window_s > 0 else None
        self._prepared: dict[str, bytes] = {}
        self._ssl = endpoint.tls() if self.tls else None
        host_header = self.host if url.port is None else f"{self.host}:{self.port}"
        access = "".join(f"{name}: {value}\r\n" for name, value in endpoint.request_headers.items())
        self._head = (f"POST {self.path} HTTP/1.1\r\nHost: {host_header}\r\nContent-Type: application/json\r\n"
                      f"Accept: text/event-stream\r\n{access}")
        models = path_and_query(under(endpoint.base_url, "models"))
        self._probe = f"GET {models} HTTP/1.1\r\nHost: {host_header}\r\n{access}\r\n".encode()

    def prepare(self, spec: RequestSpec) -> None:
        body = orjson.dumps(request_body(spec, self.endpoint.model, self.endpoint.api, self.continuous_usage,
                                         self.endpoint.extra_body, self.endpoint.stream))
        head = f"{self._head}X-Request-Id: {spec.request_id}\r\nContent-Length: {len(body)}\r\n\r\n"
        self._prepared[spec.request_id] = head.encode() + body

    async def warm(self, count: int) -> int:
        """Have `count` idle connections open ahead of a phase, each one answered (`GET …/models`) within
        `WARM_ANSWER_S`, opening at most `WARM_AT_ONCE` at a time (a burst of a thousand handshakes overflows
        a server's listen queue: dropped SYNs come back a second later, inside the phase); returns how many
        are open. A connection the server accepted but did not answer is closed, not pooled: a server with a
        fixed pool of HTTP threads (llama-server's) serves it only when a thread frees — after another
        connection's keep-alive times out, 5 s — and a request sent on it would wait that long before the
        server saw it."""
        gate = asyncio.Semaphore(WARM_AT_ONCE)

        async def one() -> H1Connection | None:
            async with gate:
                try:
                    conn = await self._connect()
                except (OSError, TimeoutError):
                    return None
                if await self._answered(conn):
                    return conn
                if conn.transport is not None:
                    conn.transport.close()
                return None

        alive = [c for c in self._idle if c.usable]
        opened = [c for c in await asyncio.gather(*(one() for _ in range(count - len(alive)))) if c is not None]
        self._idle.extend(opened)
        return len(alive) + len(opened)

    async def _answered(self, conn: H1Connection) -> bool:
        probe = conn.probe = asyncio.get_running_loop().create_future()
        assert conn.transport is not None
        conn.transport.write(self._probe)
        try:
            return await asyncio.wait_for(probe, WARM_ANSWER_S) and conn.usable
        except TimeoutError:
            return False
        finally:
            conn.probe = None

    async def close(self) -> None:
        """Close every connection this backend opened, idle or still draining a response."""
        self._idle.clear()
        for conn in self._opened:
            if conn.transport is not None:
                conn.transport.close()
        self._opened.clear()

    async def _connect(self) -> H1Connection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: H1Connection(self._idle, self._provenance, self._window), self.host,
                                   self.port, ssl=self._ssl, server_hostname=self.host if self.tls else None),
            self.connect_timeout_s)
        self._opened.add(conn)
        return conn

    async def _acquire(self, events: RequestEvents) -> tuple[H1Connection, bool]:
        """A pooled connection if one is still open (True: reused), else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn, True
        events.connecting()
        return await self._connect(), False

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        request = self._prepared.pop(spec.request_id, None)
        if request is None:
            self.prepare(spec)
            request = self._prepared.pop(spec.request_id)
        async with self._slots:
            if await self._attempt(spec.request_id, request, events, fresh=False):
                # A server may close an idle connection just as it is taken (llama-server does, while
                # advertising keep-alive): it never saw this request, so it goes once more on a new one.
                events.retried()
                await self._attempt(spec.request_id, request, events, fresh=True)

    async def _attempt(self, request_id: str, request: bytes, events: RequestEvents, fresh: bool) -> bool:
        """One try; True when a pooled connection was dead before the server answered a single byte."""
        loop = asyncio.get_running_loop()
        conn: H1Connection | None = None
        timers: list[asyncio.TimerHandle] = []
        try:
            if fresh:
                events.connecting()
            conn, reused = (await self._connect(), False) if fresh else await self._acquire(events)
            done: asyncio.Future[BaseException | None] = loop.create_future()
            timers.append(loop.call_later(self.request_timeout_s, expire, done, "request timeout"))
            first = None
            if self.first_token_timeout_s is not None:
                first = loop.call_later(self.first_token_timeout_s, expire, done, "first token timeout")
                timers.append(first)
            exchange = Exchange(request_id, events, done, first, self.endpoint.reader(events.keep_text))
            conn.exchange = exchange
            assert conn.transport is not None
            events.sent()  # handed to the connection: the server cannot see it sooner
            conn.transport.write(request)
            error = await done
            if reused and _stale(exchange, error):
                return True
            if error is None and exchange.status == 200:
                error = conn.finish(exchange)
            _settle(events, exchange, error)
            if error is None and exchange.status == 200:
                conn.answered = self._provenance.answered(conn.serial, request_id, exchange.reader.first)
            if error is None and conn.usable:
                conn = self._release(conn, exchange)
        except (OSError, TimeoutError) as exc:
            events.failed("transport_error", type(exc).__name__)
        finally:
            for timer in timers:
                timer.cancel()
            if conn is not None and conn.transport is not None:
                conn.transport.close()  # mid-response, failed, or not reusable
        return False

    def _release(self, conn: H1Connection, exchange: Exchange) -> H1Connection | None:
        """Back to the pool after a clean exchange; returns the connection when it is not reusable."""
        if not exchange.complete:  # ended at [DONE]; the body's last bytes are on their way
            conn.return_when_complete = True
            return None
        if exchange.keep_alive:
            conn.exchange = None
            self._idle.append(conn)
            return None
        return conn


def _stale(exchange: Exchange, error: BaseException | None) -> bool:
    """The connection failed before a single byte of answer: the server cannot have taken the request."""
    return (isinstance(error, ConnectionError) and not exchange.status and not exchange.head_bytes
            and not exchange.events.got_token)


def _settle(events: RequestEvents, exchange: Exchange, error: BaseException | None) -> None:
    if exchange.status:
        events.status(exchange.status)
    if isinstance(error, Expired):
        events.failed("timeout", str(error))
    elif isinstance(error, ResponseTooLarge):
        events.failed("transport_error", str(error))
    elif isinstance(error, BadChunk):
        events.failed("bad_stream", str(error))
    elif error is not None:
        if not events.done:  # after [DONE] the connection may go: the request is complete
            events.failed("transport_error", type(error).__name__)
    elif (moved := redirect(exchange.status, exchange.location.decode("latin-1"))) is not None:
        events.failed("http_error", *moved)
    elif exchange.status != 200:
        events.failed("http_error", error_reason(exchange.status, exchange.body), error_message(exchange.body))
    else:
        events.ended(exchange.reader.end)
