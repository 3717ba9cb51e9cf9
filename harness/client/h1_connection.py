"""One HTTP/1.1 connection of the lean client (`harness.client.h1`): an asyncio protocol that parses with
httptools and hands the chunks of each piece of body straight to the request's events inside `data_received`,
and the exchange — one request's response — it carries. Bytes nobody asked for close it
(`harness.client.belongs`)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import zlib
from typing import Any, cast

import httptools

from harness.client.backend import RequestEvents, take
from harness.client.belongs import Answered, Provenance
from harness.client.dialects.base import StreamReader
from harness.client.read_window import ReadWindow
from harness.errors import BadChunk
from harness.limits import ERROR_BODY_BYTES, INFLATED_BYTES, RESPONSE_HEADER_BYTES

INFLATE_STEP = 1 << 20  # … a step at a time
_SERIALS = itertools.count()  # names each connection for `Provenance`


class Exchange:
    """One request's response, as the parser reports it."""

    __slots__ = ("body", "checked", "complete", "content_type", "done", "echoed", "encoding", "events",
                 "first_timer", "framed", "head_bytes", "inflate", "inflated", "keep_alive", "location", "reader",
                 "request_id", "status")

    def __init__(self, request_id: str, events: RequestEvents, done: asyncio.Future[BaseException | None],
                 first_timer: asyncio.TimerHandle | None, reader: StreamReader) -> None:
        self.request_id = request_id
        self.events = events
        self.reader = reader
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
        self.echoed: str | None = None  # the X-Request-Id the server sent back, if any
        self.checked = False  # the stream's first payload was checked to be this request's (`belongs`)

    def takes_whole(self) -> bool:
        """Its next whole chunk may skip the parser: a 200 answer whose first payload was checked as this
        request's, with no first-token timer left to stop, not compressed, not over."""
        return (self.status == 200 and self.checked and self.first_timer is None and self.inflate is None
                and not self.complete and not self.done.done())

    def finish(self, error: BaseException | None = None) -> None:
        if not self.done.done():
            self.done.set_result(error)


class H1Connection(asyncio.Protocol):
    def __init__(self, idle: collections.deque[H1Connection], provenance: Provenance,
                 window: ReadWindow | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.parser = httptools.HttpResponseParser(self)
        self._idle = idle
        self.return_when_complete = False
        self.probe: asyncio.Future[bool] | None = None  # a warm-up's GET: answered, and kept alive
        self.provenance = provenance
        self.answered: Answered | None = None  # the last answer it carried: the next must not be it again
        self.serial = next(_SERIALS)
        # The parser's last chunk event was a chunk's end (not a size line): with a read ending in CRLF, the
        # next byte starts a chunk. `_whole`: the exchange whose next whole chunk `data_received` may take
        # itself.
        self._at_boundary = False
        self._whole: Exchange | None = None
        self._window = window  # `client.read_window_us`: None, the loop polls whenever it has nothing to do

    # -- asyncio protocol --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if self._window is not None:
            self._window.touch()
        whole = self._whole
        # The usual read of a busy stream: one whole HTTP chunk holding one plain token event. Taken here, the
        # parser skipped: a whole chunk at a chunk boundary leaves it exactly where it was.
        if whole is not None and whole is self.exchange and not whole.done.done() and whole.reader.framed(data):
            if whole.events.token():
                whole.finish()
            return
        self._whole = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
        except BadChunk as exc:
            self._fail(exc)
        ex = self.exchange
        if self._at_boundary and data[-2:] == b"\r\n" and ex is not None and ex.takes_whole():
            self._whole = ex
        if ex is not None and not ex.status:  # still in the headers, which might never end
            ex.head_bytes += len(data)
            if ex.head_bytes > RESPONSE_HEADER_BYTES:
                self._fail(ResponseTooLarge(f"response headers over {RESPONSE_HEADER_BYTES >> 10} KiB"))

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
    def on_message_begin(self) -> None:
        ex = self.exchange
        if (ex is None and self.probe is None) or (ex is not None and ex.complete):
            # An answer nobody asked for (left over, replayed): read as the next request's, it would score
            # that request from bytes sent before it. Nothing more is read from this connection; it is never
            # reused.
            self.exchange = None
            if self.transport is not None:
                self.transport.close()

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
        elif name == b"x-request-id":
            ex.echoed = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        ex = self.exchange
        if ex is None:
            return
        ex.status = self.parser.get_status_code()
        if (stale := self.provenance.stale_echo(ex.request_id, self.answered, ex.echoed)) is not None:
            self._disown(BadChunk(stale))
            return
        if ex.status == 200 and ex.reader.streams and not ex.content_type.lower().startswith(b"text/event-stream"):
            ex.events.media(ex.content_type.decode("latin-1") or "(none)")
        if ex.encoding in (b"gzip", b"x-gzip", b"deflate"):  # never asked for, but some servers compress anyway
            ex.inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if b"gzip" in ex.encoding else zlib.MAX_WBITS)
        elif ex.encoding not in (b"", b"identity"):
            self._fail(BadChunk(f"Content-Encoding {ex.encoding.decode('latin-1')[:20]} is not supported"))

    def on_chunk_header(self) -> None:
        self._at_boundary = False

    def on_chunk_complete(self) -> None:
        self._at_boundary = True

    def on_body(self, body: bytes) -> None:
        ex = self.exchange
        if ex is None:
            return
        if ex.inflate is not None:
            self._inflated(ex, body)
        elif ex.status != 200:
            if len(ex.body) < ERROR_BODY_BYTES:
                ex.body += body
        elif not ex.events.done:
            try:
                over = take(ex.reader, ex.events, body)
            except BadChunk as bad:
                why = self._foreign(ex)  # another API's answer fails to parse as this one's: named as foreign
                self._fail(bad if why is None else BadChunk(why))
                return
            if (why := self._foreign(ex)) is not None:
                self._disown(BadChunk(why))
                return
            if ex.first_timer is not None and ex.events.got_token:
                ex.first_timer.cancel()
                ex.first_timer = None
            if over:
                ex.finish()  # [DONE]: the request is over for the harness, whatever follows

    def finish(self, ex: Exchange) -> BadChunk | None:
        """The body ended: what it completes (an answer that comes whole) read and handed on, once its head is
        checked for whose it is; the reason it is not this request's, or not readable, otherwise."""
        try:
            whole = ex.reader.finish()
        except BadChunk as bad:  # another API's answer fails to parse as this one's: named as foreign
            why = self._foreign(ex)
            return bad if why is None else BadChunk(why)
        if (why := self._foreign(ex)) is not None:
            return BadChunk(why)
        ex.events.chunks(whole)
        return None

    def _foreign(self, ex: Exchange) -> str | None:
        """Once the answer's first payload is in: why it is not this request's answer (`belongs`), or None."""
        if ex.checked or ex.reader.first is None:
            return None
        ex.checked = True
        return self.provenance.foreign(ex.request_id, self.answered, ex.reader.first, ex.echoed)

    def _inflated(self, ex: Exchange, body: bytes) -> None:
        """A compressed body a step at a time, each read as a body (`on_body`, the inflater set aside): a gzip
        bomb took 510 MB inflated at once; memory now holds one step, and the whole is capped."""
        inflate, ex.inflate = ex.inflate, None
        try:
            while body and not ex.done.done() and self.exchange is ex:
                piece = inflate.decompress(body, INFLATE_STEP)
                ex.inflated += len(piece)
                if ex.inflated > INFLATED_BYTES:
                    return self._fail(ResponseTooLarge(f"the {ex.encoding.decode()} body inflates past "
                                                       f"{INFLATED_BYTES >> 20} MiB: not a stream of tokens"))
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

    def _disown(self, exc: BadChunk) -> None:
        """Not this request's answer: it fails, and nothing more of this connection reaches it."""
        self._fail(exc)
        self.exchange = None

    def _fail(self, exc: BaseException) -> None:
        if self.exchange is not None:
            self.exchange.finish(exc)
        if self.transport is not None:
            self.transport.close()

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()


class Expired(Exception):
    pass


class ResponseTooLarge(Exception):
    """A part of the response past its documented cap."""


def expire(done: asyncio.Future[Any], reason: str) -> None:
    if not done.done():
        done.set_result(Expired(reason))
