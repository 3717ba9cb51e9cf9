"""Server-sent events and OpenAI stream chunks, parsed without any I/O.

`SSEDecoder` turns arbitrary byte pieces into complete `data:` payloads (and, for an API that names its
events, each payload's `event:` name); `ChunkReader` turns a chat or completions stream's bytes into chunks,
each payload read by `harness.client.chat_chunk`. The APIs whose events are typed read through
`harness.client.typed_events`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from harness.client.chat_chunk import _parse, interpret, interpret_text
from harness.client.chunk import Chunk
from harness.errors import BadChunk
from harness.limits import SSE_LINE_BYTES

BOM = b"\xef\xbb\xbf"


class SSEDecoder:
    """Incremental decoder: bytes in (split anywhere), complete event data payloads out.

    An unfinished line is kept as its pieces and joined once, when its end comes, so a long line costs
    what it weighs, not its square; past `SSE_LINE_BYTES` it is refused.
    """

    __slots__ = ("_data", "_event", "_fresh", "_named", "_names", "_pending", "_pending_len")

    def __init__(self, named: bool = False) -> None:
        """`named`: keep each event's `event:` name (`events`); chat's streams name none, and pay nothing for
        it."""
        self._pending: list[bytes] = []  # pieces of the line not yet ended
        self._pending_len = 0
        self._data: list[bytes] = []
        self._fresh = True  # nothing read yet: a byte-order mark may lead (the SSE standard strips it)
        self._named = named
        self._event = b""  # the `event:` name of the event being read
        self._names: list[bytes] = []  # the names of the payloads `_split` returned, in order (named only)

    def events(self, piece: bytes) -> list[tuple[bytes, bytes]]:
        """(name, payload) of each event `piece` completes; the name is b"" where the event gave none."""
        payloads = self._split(self._unmarked(piece))
        names, self._names = self._names, []
        return list(zip(names, payloads, strict=True))

    def _unmarked(self, piece: bytes) -> bytes:
        if self._fresh and piece:
            self._fresh = False
            if piece.startswith(BOM):
                piece = piece[len(BOM):]
        return piece

    def feed(self, piece: bytes) -> list[bytes]:
        if self._fresh:
            piece = self._unmarked(piece)
        # The usual piece of a busy stream is exactly one event ("data: {...}\n\n", one HTTP chunk, as vLLM,
        # llama.cpp and TGI write them): taken whole, without splitting into lines.
        if (piece[-2:] == b"\n\n" and piece[:6] == b"data: " and not self._pending and not self._data
                and piece.find(b"\n") == len(piece) - 2 and piece[-3:-2] != b"\r"):
            return [piece[6:-2]]
        return self._split(piece)

    def _split(self, piece: bytes) -> list[bytes]:
        if b"\n" not in piece:
            self._pending.append(piece)
            self._pending_len += len(piece)
            if self._pending_len > SSE_LINE_BYTES:
                raise BadChunk(f"stream line longer than {SSE_LINE_BYTES >> 20} MiB")
            return []
        if self._pending:
            piece = b"".join((*self._pending, piece))
            self._pending, self._pending_len = [], 0
        lines = piece.split(b"\n")
        tail = lines.pop()
        if tail:
            self._pending, self._pending_len = [tail], len(tail)
        events: list[bytes] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
                    if self._named:
                        self._names.append(self._event)
                self._event = b""
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
            elif self._named and line.startswith(b"event:"):
                value = line[6:]
                self._event = value[1:] if value.startswith(b" ") else value
            # Comments (":"), "id:" and "retry:" lines carry nothing we measure.
        return events

    def close(self) -> list[bytes]:
        """Payloads left when the stream ends without a final blank line."""
        return self.feed(b"\n\n") if self._pending or self._data else []

    @property
    def midway(self) -> bool:
        """Part of a line or of an event is read and not yet ended."""
        return bool(self._pending or self._data)


class ChunkReader:
    """Body bytes in, the chunks they complete out. Payloads after `[DONE]` or an error in the same read are
    not the stream's: they are dropped, never reported as a bad chunk."""

    __slots__ = ("_decoder", "_head", "_interpret", "_keep_text", "_last", "_prev", "_tail", "_tail_crlf", "first")
    end = "[DONE]"
    streams = True

    def __init__(self, keep_text: bool = False) -> None:
        self._decoder = SSEDecoder()
        self._keep_text = keep_text
        self._interpret = interpret_text if keep_text else interpret
        self._prev = self._last = b""  # the last two payloads: where a finish_reason sits
        self.first: bytes | None = None  # the stream's first payload: whose answer this is (`belongs`)
        # A plain token event's bytes before its content and after it, once one passed every check: a server
        # repeats them for every token of a stream (vLLM's id, time, model), so the next is known by two
        # compares.
        self._head = self._tail = b"\x00"
        self._tail_crlf = b"\x00\r\n"  # the tail, then the CRLF that ends its HTTP chunk

    def plain(self, data: bytes) -> bool:
        """True: `data` is exactly one whole event carrying one plain token in the compact shape servers write
        (`data: {…"content":"x"…}` and a blank line, nothing pending, no usage, error or reasoning) and has
        been taken; False: nothing was taken, `read` it. The usual read of a busy stream, without the lists,
        the chunk and the loop of `read`."""
        decoder = self._decoder
        if self._keep_text or decoder._pending or decoder._data:
            return False
        head, tail = self._head, self._tail
        if data.startswith(head) and data.endswith(tail):
            # The event of the last token with another token between the same bytes: its own checks hold if
            # the token has no quote (which would end the string early) and no line break (a second event).
            token = data[len(head):len(data) - len(tail)]
            if not token or token.find(b'"') >= 0 or token.find(b"\n") >= 0:
                return False
        elif not self._checked(data):
            return False
        self._prev, self._last = self._last, data[6:-2]
        if self.first is None:
            self.first = self._last
        decoder._fresh = False
        return True

    def framed(self, data: bytes) -> bool:
        """`plain` for one whole HTTP chunk — its size line, one event, CRLF — as a chunked body's read brings
        it: the framing checked here, and a repeated event known by its bytes without being copied out."""
        at = data.find(b"\r\n")
        if data[:at] != b"%x" % (len(data) - at - 4) or data[-2:] != b"\r\n":
            return False
        decoder = self._decoder
        if (data.endswith(self._tail_crlf) and data.startswith(self._head, at + 2) and not self._keep_text
                and not decoder._pending and not decoder._data):
            token = data[at + 2 + len(self._head):len(data) - len(self._tail_crlf)]
            if token and token.find(b'"') < 0 and token.find(b"\n") < 0:
                self._prev, self._last = self._last, data  # framed: `_closing` takes the JSON out if it must
                return True
            return False
        return self.plain(data[at + 2:-2])

    def _checked(self, data: bytes) -> bool:
        """`plain`'s checks in full, keeping the bytes around the token of an event that passes them."""
        if (data[:7] != b"data: {" or data[-3:] != b"}\n\n" or data.find(b"\n") != len(data) - 2
                or data.find(b'"usage"') >= 0 or data.find(b'"error"') >= 0 or data.find(b'"reasoning') >= 0):
            return False
        at = data.find(b'"content":"')
        if at < 0 or data[at + 11:at + 12] == b'"':
            return False
        end = data.find(b'"', at + 11)
        if data.find(b"\\", at + 11, end) < 0:  # an escape in the token: where it ends is not one find away
            self._head, self._tail = data[:at + 11], data[end:]
            self._tail_crlf = self._tail + b"\r\n"
        return True

    def read(self, data: bytes) -> Sequence[Chunk]:
        payloads = self._decoder.feed(data)
        if self.first is None and payloads:
            self.first = payloads[0]
        if len(payloads) == 1:  # one event per read: the usual shape of a busy stream
            chunk = self._interpret(payloads[0])
            if chunk.done:
                return (self._closing(chunk),)
            self._prev, self._last = self._last, payloads[0]
            return (chunk,)
        try:
            chunks = [self._interpret(p) for p in payloads]
        except BadChunk:
            return _until_bad(payloads, self._interpret)
        for payload, chunk in zip(payloads, chunks, strict=True):
            if chunk.done:
                self._closing(chunk)
                break
            self._prev, self._last = self._last, payload
        return chunks

    def finish(self) -> Sequence[Chunk]:
        """The body ended: a stream's events are whole only with their blank line, so nothing more is
        complete."""
        return ()

    def _closing(self, done: Chunk) -> Chunk:
        """[DONE], with the finish_reason of the last chunk before it that gave one (vLLM puts it on the last
        token's chunk, then the usage chunk follows)."""
        for payload in (self._last, self._prev):
            if payload[:1] != b"{":  # a whole HTTP chunk `framed` kept: its event's JSON
                payload = payload[payload.find(b"{"):payload.rfind(b"}") + 1]
            if payload.find(b"_reason") >= 0:
                with contextlib.suppress(BadChunk):
                    reason = _parse(payload).finish_reason
                    if reason is not None:
                        done.finish_reason = reason
                        return done
        return done


def _until_bad(payloads: list[bytes], read: Callable[[bytes], Chunk]) -> list[Chunk]:
    """The chunks up to the stream's end; a bad payload before it raises."""
    chunks = []
    for payload in payloads:
        chunk = read(payload)
        chunks.append(chunk)
        if chunk.done or chunk.error is not None:
            break
    return chunks
