"""Streams whose events are typed (the Responses API's `response.output_text.delta`, Anthropic's
`content_block_delta`): each payload parsed whole by its dialect, with its `event:` name. No fast path: chat's
shortcuts rest on the shape of one OpenAI chunk, and these streams carry other shapes between their tokens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.client.chunk import Chunk, json_object
from harness.client.sse import SSEDecoder
from harness.errors import BadChunk
from harness.limits import WHOLE_ANSWER_BYTES

Interpret = Callable[[bytes, bytes], Chunk]  # (event name, payload) -> what it tells


class _EveryByteParsed:
    """A reader with none of chat's shortcuts: every read goes through `read`."""

    __slots__ = ("end", "first")

    def __init__(self, end: str) -> None:
        self.end = end
        self.first: bytes | None = None

    def plain(self, data: bytes) -> bool:
        return False

    def framed(self, data: bytes) -> bool:
        return False


class EventReader(_EveryByteParsed):
    """Body bytes in, the chunks they complete out; what follows the stream's end or an error is not read."""

    __slots__ = ("_decoder", "_interpret")
    streams = True

    def __init__(self, interpret: Interpret, end: str) -> None:
        super().__init__(end)
        self._decoder = SSEDecoder(named=True)
        self._interpret = interpret

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

    def finish(self) -> Sequence[Chunk]:
        return ()


class WholeReader(_EveryByteParsed):
    """An answer that comes whole (`stream: false`, embeddings): its bytes kept to `WHOLE_ANSWER_BYTES`, read
    at its end."""

    __slots__ = ("_answer", "_parts", "_size")
    streams = False

    def __init__(self, answer: Callable[[bytes], Chunk], end: str = "an answer") -> None:
        super().__init__(end)
        self._answer = answer
        self._parts: list[bytes] = []
        self._size = 0

    def read(self, data: bytes) -> Sequence[Chunk]:
        self._size += len(data)
        if self._size > WHOLE_ANSWER_BYTES:
            raise BadChunk(f"answer longer than {WHOLE_ANSWER_BYTES >> 20} MiB")
        self._parts.append(data)
        return ()

    def finish(self) -> Sequence[Chunk]:
        if not self._size:
            return ()
        whole = b"".join(self._parts)
        self.first = whole[:4096]  # where an answer's object and id are: whose it is (`belongs`), checked now
        return (self._answer(whole),)




def error_chunk(error: object) -> Chunk:
    """An answer's `error` (an object with a message, or the message) as the chunk the worker fails it
    with."""
    return Chunk(error=str(error.get("message", error)) if isinstance(error, dict) else str(error))


def event_object(name: bytes, payload: bytes) -> tuple[str, dict[str, object]]:
    """A typed event's payload as an object, and its type: the `event:` name, else the payload's own
    `type`."""
    obj = json_object(payload, "stream event")
    kind = obj.get("type")
    if name:
        return name.decode("utf-8", "replace"), obj
    if not isinstance(kind, str):
        raise BadChunk(f"stream event without a type: {payload[:80]!r}")
    return kind, obj


def text(value: object) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def items(obj: object, key: str) -> list[dict[str, object]]:
    """The objects in the list `obj[key]`; none where either is missing or not what it should be."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def section(obj: object, key: str) -> dict[str, object]:
    """`obj[key]` when both are objects; else an empty one (a field a server left out)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}
