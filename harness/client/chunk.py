"""What one event of an answer tells the harness, whichever API's it is: a token of the answer, of thinking or
of a tool call; usage and finish; an error; the end. Every dialect's reader gives these
(`harness.client.dialects`), and the worker stamps them (`harness.run.worker`)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from harness.errors import BadChunk
from harness.limits import USAGE_TOKENS


@dataclass(slots=True)
class Chunk:
    """What one stream payload tells the harness."""

    done: bool = False
    has_content: bool = False  # delta.content or text: the answer itself
    has_reasoning: bool = False  # delta.reasoning_content / delta.reasoning
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens (OpenAI's reasoning models)
    error: str | None = None
    finish_reason: str | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, or llama.cpp's timings.cache_n
    server_prompt_ms: float | None = None  # llama.cpp's timings: its own time on the prompt …
    server_decode_ms: float | None = None  # … and on generating the answer
    text: str | None = None  # the answer's text, only when asked for (multi-turn sessions carry it forward)
    plain: bool = False  # a token and nothing else a reader must look at: the fast path's chunks
    whole: bool = False  # an answer that came whole, not streamed (embeddings): its arrival ends the request
    inputs: int | None = None  # a whole answer's count of results (embeddings: one per text sent)

    @property
    def carries_token(self) -> bool:
        return self.has_content or self.has_reasoning


def usage_count(usage: dict[str, object], name: str, payload: bytes, where: str = "usage") -> int | None:
    """A usage count: absent, or a whole number ≥ 0; anything else makes the chunk bad."""
    value = usage.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadChunk(f"{where}.{name} is not a count: {str(value)[:40]}")
    if value > USAGE_TOKENS:  # past any context: a count nothing real sends, and one the statistics must not size by
        raise BadChunk(f"{where}.{name} is not a count: {value:.3g} is past {USAGE_TOKENS:,}")
    return value


def json_object(body: bytes, what: str) -> dict[str, object]:
    """A whole answer's JSON object; BadChunk naming `what` when it is not one."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadChunk(f"invalid JSON in {what}: {body[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise BadChunk(f"{what} is not an object: {body[:80]!r}")
    return obj
