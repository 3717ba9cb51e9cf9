"""Streams whose events are typed (the Responses API's `response.output_text.delta`, Anthropic's
`content_block_delta`): each payload parsed whole by its dialect, with its `event:` name. No fast path: chat's
shortcuts rest on the shape of one OpenAI chunk, and these streams carry other shapes between their tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson

from harness.client.sse import Chunk, SSEDecoder
from harness.errors import BadChunk

Interpret = Callable[[bytes, bytes], Chunk]  # (event name, payload) -> what it tells


class EventReader:
    """Body bytes in, the chunks they complete out; what follows the stream's end or an error is not read."""

    __slots__ = ("_decoder", "_interpret", "end", "first")

    def __init__(self, interpret: Interpret, end: str) -> None:
        self._decoder = SSEDecoder(named=True)
        self._interpret = interpret
        self.end = end
        self.first: bytes | None = None

    def plain(self, data: bytes) -> bool:
        return False

    def framed(self, data: bytes) -> bool:
        return False

    def read(self, data: bytes) -> Sequence[Chunk]:
        events = self._decoder.events(data)
        if self.first is None and events:
            self.first = events[0][1]
        chunks = []
        for name, payload in events:
            chunk = self._interpret(name, payload)
            chunks.append(chunk)
            if chunk.done or chunk.error is not None:
                break
        return chunks


def event_object(name: bytes, payload: bytes) -> tuple[str, dict[str, object]]:
    """A typed event's payload as an object, and its type: the `event:` name, else the payload's own `type`."""
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise BadChunk(f"invalid JSON in stream event: {payload[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise BadChunk(f"stream event is not an object: {payload[:80]!r}")
    kind = obj.get("type")
    if name:
        return name.decode("utf-8", "replace"), obj
    if not isinstance(kind, str):
        raise BadChunk(f"stream event without a type: {payload[:80]!r}")
    return kind, obj


def text(value: object) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def section(obj: object, key: str) -> dict[str, object]:
    """`obj[key]` when both are objects; else an empty one (a field a server left out)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}
