"""A lean HTTP/1.1 streaming client for the hot path: one asyncio protocol per connection.

aiohttp spends ~13 µs on every streamed event (its body reader wakes the reading task once per
HTTP chunk). Here the connection's protocol hands the chunks of each piece of body straight to the
worker's events inside `data_received`, and the request's task wakes once, at the end: a few µs an
event. httptools (the parser uvicorn uses) does the HTTP; this module only keeps connections. It
speaks exactly what the harness needs: POST with a JSON body, keep-alive, chunked or sized
responses, TLS for https. Failures become events, as in `harness.client.aio`.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
import zlib
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import orjson

from harness.client.backend import (
    WARM_ANSWER_S,
    Endpoint,
    RequestEvents,
    error_message,
    error_reason,
    redirect,
    request_body,
    take,
)
from harness.client.sse import ChunkReader
from harness.client.urls import path_and_query, under
from harness.errors import BadChunk
from harness.workload.requests import RequestSpec

_ERROR_BODY_LIMIT = 8192
HEADER_LIMIT = 64 << 10  # a real server's response headers are well under a kilobyte
INFLATED_LIMIT = 64 << 20  # a compressed answer inflates to no more (a stream of 100k tokens is ~20 MiB) …
INFLATE_STEP = 1 << 20  # … a step at a time
WARM_AT_ONCE = 64  # handshakes in flight while the pool is opened ahead of a phase


class _Exchange:
    """One request's response, as the parser reports it."""

    __slots__ = ("body", "complete", "content_type", "done", "encoding", "events", "first_timer", "framed",
                 "head_bytes", "inflate", "inflated", "keep_alive", "location", "reader", "status")

    def __init__(self, events: RequestEvents, done: asyncio.Future[BaseException | None],
                 first_timer: asyncio.TimerHandle | None) -> None:
        self.events = events
        self.reader = ChunkReader(events.keep_text)
        self.first_timer = first_timer
        self.done = done
        self.status = 0
        self.body = b""
        self.keep_alive = False
        self.complete = False  # the HTTP message ended (the body's last chunk came)
        self.framed = False  # chunked or sized; otherwise the body ends when the server closes
        self.head_bytes = 0  # read before the headers were complete
        self.encoding = b""  # Content-Encoding, lower case
        self.inflate: Any = None  # a zlib decompressor for a gzip or deflate body
        self.inflated = 0  # bytes it gave so far
        self.location = b""  # a redirect's target, never followed
        self.content_type = b""

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done.done():
            self.done.set_result(error)


class _Connection(asyncio.Protocol):
    def __init__(self, idle: collections.deque[_Connection]) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.parser = httptools.HttpResponseParser(self)
        self._idle = idle
        self.return_when_complete = False
        self.probe: asyncio.Future[bool] | None = None  # a warm-up's GET: answered, and kept alive

    # -- asyncio protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
        except BadChunk as exc:
            self._fail(exc)
        ex = self.exchange
        if ex is not None and not ex.status:  # still in the headers, which might never end
            ex.head_bytes += len(data)
            if ex.head_bytes > HEADER_LIMIT:
                self._fail(ResponseTooLarge(f"response headers over {HEADER_LIMIT >> 10} KiB"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.probe is not None and not self.probe.done():
            self.probe.set_result(False)
        if self.exchange is None and self in self._idle:
            self._idle.remove(self)  # closed by the server while idle: out of the pool at once
        ex = self.exchange
        if exc is None and ex is not None and ex.status and not ex.framed and not ex.complete:
            ex.complete = True  # a body without length or chunks ends at the close: that is its end, not a reset
            ex.finish()
            return
        self._fail(exc or ConnectionResetError("server closed the connection"))

    # -- httptools callbacks --
    def on_header(self, name: bytes, value: bytes) -> None:
        ex = self.exchange
        if ex is None:
            return
        name = name.lower()
        if name in (b"content-length", b"transfer-encoding"):
            ex.framed = True
        elif name == b"content-encoding":
            ex.encoding = value.strip().lower()
        elif name == b"location":
            ex.location = value
        elif name == b"content-type":
            ex.content_type = value

    def on_headers_complete(self) -> None:
        ex = self.exchange
        if ex is None:
            return
        ex.status = self.parser.get_status_code()
        if ex.status == 200 and not ex.content_type.lower().startswith(b"text/event-stream"):
            ex.events.media(ex.content_type.decode("latin-1") or "(none)")
        if ex.encoding in (b"gzip", b"x-gzip", b"deflate"):  # never asked for, but some servers compress anyway
            ex.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if b"gzip" in ex.encoding else zlib.MAX_WBITS)
        elif ex.encoding not in (b"", b"identity"):
            self._fail(BadChunk(f"Content-Encoding {ex.encoding.decode('latin-1')[:20]} is not supported"))

    def on_body(self, body: bytes) -> None:
        ex = self.exchange
        if ex is None:
            return
        if ex.inflate is not None:
            self._inflated(ex, body)
        elif ex.status != 200:
            if len(ex.body) < _ERROR_BODY_LIMIT:
                ex.body += body
        elif not ex.events.done:
            try:
                over = take(ex.reader, ex.events, body)
            except BadChunk as exc:
                self._fail(exc)
                return
            if ex.first_timer is not None and ex.events.got_token:
                ex.first_timer.cancel()
                ex.first_timer = None
            if over:
                ex.finish()  # [DONE]: the request is over for the harness, whatever follows

    def _inflated(self, ex: _Exchange, body: bytes) -> None:
        """A compressed body a step at a time, each read as a body (`on_body`, the inflater set aside): a gzip bomb
        took 510 MB inflated at once; memory now holds one step, and the whole is capped."""
        inflate, ex.inflate = ex.inflate, None
        try:
            while body and not ex.done.done() and self.exchange is ex:
                piece = inflate.decompress(body, INFLATE_STEP)
                ex.inflated += len(piece)
                if ex.inflated > INFLATED_LIMIT:
                    return self._fail(ResponseTooLarge(f"the {ex.encoding.decode()} body inflates past "
                                                       f"{INFLATED_LIMIT >> 20} MiB: not a stream of tokens"))
                self.on_body(piece)
                body = inflate.unconsumed_tail
        except zlib.error as exc:
            self._fail(BadChunk(f"the {ex.encoding.decode()} body does not decode: {exc}"))
        finally:
            ex.inflate = inflate

    def on_message_complete(self) -> None:
        ex = self.exchange
        if ex is None:
            if self.probe is not None and not self.probe.done():
                self.probe.set_result(self.parser.should_keep_alive())
            return
        ex.complete = True
        ex.keep_alive = self.parser.should_keep_alive()
        ex.finish()
        if self.return_when_complete:  # the request had already ended at [DONE]: now reusable
            self.return_when_complete = False
            self.exchange = None
            if ex.keep_alive and self.usable:
                self._idle.append(self)
            elif self.transport is not None:
                self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        if self.exchange is not None:
            self.exchange.finish(exc)
        if self.transport is not None:
            self.transport.close()

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()


class H1Backend:
    """The `Backend` of the harness on `_Connection`s, with a keep-alive pool of `max_connections`."""

    def __init__(self, endpoint: Endpoint, max_connections: int, connect_timeout_s: float,
                 request_timeout_s: float, first_token_timeout_s: float | None = None,
                 continuous_usage: bool = False) -> None:
        url = urlsplit(endpoint.url)
        self.endpoint = endpoint
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.path = path_and_query(endpoint.url)
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_token_timeout_s = first_token_timeout_s
        self.continuous_usage = continuous_usage
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: collections.deque[_Connection] = collections.deque()
        self._opened: weakref.WeakSet[_Connection] = weakref.WeakSet()
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
                                         self.endpoint.extra_body))
        head = f"{self._head}X-Request-Id: {spec.request_id}\r\nContent-Length: {len(body)}\r\n\r\n"
        self._prepared[spec.request_id] = head.encode() + body

    async def warm(self, count: int) -> int:
        """Have `count` idle connections open ahead of a phase, each one answered (`GET …/models`) within
        `WARM_ANSWER_S`, opening at most `WARM_AT_ONCE` at a time (a burst of a thousand handshakes overflows a
        server's listen queue: dropped SYNs come back a second later, inside the phase); returns how many are
        open. A connection the server accepted but did not answer is closed, not pooled: a server with a fixed
        pool of HTTP threads (llama-server's) serves it only when a thread frees — after another connection's
        keep-alive times out, 5 s — and a request sent on it would wait that long before the server saw it."""
        gate = asyncio.Semaphore(WARM_AT_ONCE)

        async def one() -> _Connection | None:
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

    async def _answered(self, conn: _Connection) -> bool:
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

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: _Connection(self._idle), self.host, self.port, ssl=self._ssl,
                                   server_hostname=self.host if self.tls else None),
            self.connect_timeout_s)
        self._opened.add(conn)
        return conn

    async def _acquire(self, events: RequestEvents) -> tuple[_Connection, bool]:
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
            if await self._attempt(request, events, fresh=False):
                # A server may close an idle connection just as it is taken (llama-server does, while
                # advertising keep-alive): it never saw this request, so it goes once more on a new one.
                events.retried()
                await self._attempt(request, events, fresh=True)

    async def _attempt(self, request: bytes, events: RequestEvents, fresh: bool) -> bool:
        """One try; True when a pooled connection was dead before the server answered a single byte."""
        loop = asyncio.get_running_loop()
        conn: _Connection | None = None
        timers: list[asyncio.TimerHandle] = []
        try:
            if fresh:
                events.connecting()
            conn, reused = (await self._connect(), False) if fresh else await self._acquire(events)
            done: asyncio.Future[BaseException | None] = loop.create_future()
            timers.append(loop.call_later(self.request_timeout_s, _expire, done, "request timeout"))
            first = None
            if self.first_token_timeout_s is not None:
                first = loop.call_later(self.first_token_timeout_s, _expire, done, "first token timeout")
                timers.append(first)
            exchange = _Exchange(events, done, first)
            conn.exchange = exchange
            assert conn.transport is not None
            events.sent()  # handed to the connection: the server cannot see it sooner
            conn.transport.write(request)
            error = await done
            if reused and _stale(exchange, error):
                return True
            _settle(events, exchange, error)
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

    def _release(self, conn: _Connection, exchange: _Exchange) -> _Connection | None:
        """Back to the pool after a clean exchange; returns the connection when it is not reusable."""
        if not exchange.complete:  # ended at [DONE]; the body's last bytes are on their way
            conn.return_when_complete = True
            return None
        if exchange.keep_alive:
            conn.exchange = None
            self._idle.append(conn)
            return None
        return conn


def _stale(exchange: _Exchange, error: BaseException | None) -> bool:
    """The connection failed before a single byte of answer: the server cannot have taken the request."""
    return (isinstance(error, ConnectionError) and not exchange.status and not exchange.head_bytes
            and not exchange.events.got_token)


def _settle(events: RequestEvents, exchange: _Exchange, error: BaseException | None) -> None:
    if exchange.status:
        events.status(exchange.status)
    if isinstance(error, _Expired):
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
        events.ended()


class _Expired(Exception):
    pass


class ResponseTooLarge(Exception):
    """A part of the response past its documented cap."""


def _expire(done: asyncio.Future[Any], reason: str) -> None:
    if not done.done():
        done.set_result(_Expired(reason))

