"""Server-sent events and OpenAI stream chunks, parsed without any I/O.

`SSEDecoder` turns arbitrary byte pieces into complete `data:` payloads (and, for an API that names its
events, each payload's `event:` name); `interpret` turns one OpenAI chunk into what the harness measures:
chat's and completions' parser, with the fast paths for a plain token. The APIs whose events are typed read
through `harness.client.typed_events`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence

import orjson

from harness.client.chunk import Chunk, json_object, usage_count
from harness.errors import BadChunk
from harness.limits import SSE_LINE_BYTES

DONE = b"[DONE]"


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


# Inside JSON strings every quote is escaped, so these structural patterns cannot be forged by text.
_CONTENT = re.compile(rb'"(?:content|text)":\s*"(?!")')
_REASONING = re.compile(rb'"(?:reasoning_content|reasoning)":\s*"(?!")')

# What the fast path returns, shared: no reader of a chunk changes one it did not parse itself.
_CONTENT_ONLY = Chunk(has_content=True, plain=True)
_REASONING_ONLY = Chunk(has_reasoning=True, plain=True)
_BOTH = Chunk(has_content=True, has_reasoning=True, plain=True)


def interpret(payload: bytes) -> Chunk:
    if payload[:1] != b"{" and payload.strip() == DONE:
        return Chunk(done=True)
    # Fast path for the chunk that is nearly every chunk: an object with a non-empty text field and no usage
    # or error. A few literal searches instead of a JSON parse; everything else is parsed. A finish_reason on
    # a fast-path chunk is read once, at [DONE] (`ChunkReader`): a third scan of every chunk would cost as
    # much as the two above. `.find` rather than `in`: on bytes, CPython 3.11's `in` first tries the needle as
    # an integer and pays for the TypeError on every call (0.23 against 0.13 µs here).
    if (payload[:1] == b"{" and payload[-1:] == b"}" and payload.find(b'"usage"') < 0
            and payload.find(b'"error"') < 0):
        if payload.find(b'"reasoning') < 0:
            at = payload.find(b'"content":"')  # the compact shape vLLM, SGLang and llama.cpp write: one scan
            if at >= 0 and payload[at + 11:at + 12] != b'"':
                return _CONTENT_ONLY
            if _has_text(payload, b'"content":') or _has_text(payload, b'"text":'):
                return _CONTENT_ONLY
        else:
            content = _CONTENT.search(payload) is not None
            reasoning = _REASONING.search(payload) is not None
            if content or reasoning:
                return _BOTH if content and reasoning else _CONTENT_ONLY if content else _REASONING_ONLY
    return _parse(payload)


def _has_text(payload: bytes, key: bytes) -> bool:
    """`key` (a JSON key with its colon) followed by a non-empty string. Inside JSON strings every quote is
    escaped, so the key found is a key, never text."""
    at = payload.find(key)
    while at >= 0:
        at += len(key)
        while payload[at:at + 1] == b" ":
            at += 1
        if payload[at:at + 1] == b'"' and payload[at + 1:at + 2] != b'"':
            return True
        at = payload.find(key, at)
    return False


def interpret_text(payload: bytes) -> Chunk:
    """`interpret`, keeping the answer's text (always a full parse: sessions need the words, not their
    presence)."""
    if payload.strip() == DONE:
        return Chunk(done=True)
    chunk = _parse(payload)
    if chunk.has_content:
        choices = orjson.loads(payload).get("choices") or []
        chunk.text = "".join(_content(c) for c in choices)
    return chunk


def _content(choice: dict[str, object]) -> str:
    delta = choice.get("delta")
    value = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return value if isinstance(value, str) else ""


def _parse(payload: bytes) -> Chunk:
    obj = json_object(payload, "stream chunk")
    chunk = Chunk()
    if "error" in obj:
        err = obj["error"]
        chunk.error = str(err.get("message", err)) if isinstance(err, dict) else str(err)
        return chunk
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise BadChunk(f"stream chunk's choices are not objects: {payload[:80]!r}")
    for choice in choices:
        if isinstance(choice.get("finish_reason"), str):
            chunk.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            # A tool call's streamed arguments are the answer too: what the application acts on.
            chunk.has_content |= _text(delta.get("content")) or _tool_text(delta.get("tool_calls"))
            chunk.has_reasoning |= _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        else:
            chunk.has_content |= _text(choice.get("text"))
    usage = obj.get("usage")
    if isinstance(usage, dict):
        chunk.prompt_tokens = usage_count(usage, "prompt_tokens", payload)
        chunk.completion_tokens = usage_count(usage, "completion_tokens", payload)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            chunk.cached_tokens = usage_count(details, "cached_tokens", payload, "usage.prompt_tokens_details")
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict):
            chunk.reasoning_tokens = usage_count(details, "reasoning_tokens", payload,
                                                 "usage.completion_tokens_details")
    timings = obj.get("timings")  # llama.cpp's llama-server
    if isinstance(timings, dict):
        if chunk.cached_tokens is None:
            chunk.cached_tokens = usage_count(timings, "cache_n", payload, "timings")
        chunk.server_prompt_ms, chunk.server_decode_ms = _ms(timings.get("prompt_ms")), _ms(timings.get("predicted_ms"))
    return chunk


def _ms(value: object) -> float | None:
    """A server's own timing in ms, when it is one (a number ≥ 0); anything else is not kept."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
        return None
    return float(value)


def _text(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _tool_text(calls: object) -> bool:
    """`delta.tool_calls` carrying a piece of a call: its name or some of its arguments."""
    if not isinstance(calls, list):
        return False
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and (_text(function.get("arguments")) or _text(function.get("name"))):
            return True
    return False


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
