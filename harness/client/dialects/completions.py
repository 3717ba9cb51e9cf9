"""OpenAI's (legacy) completions (`/v1/completions`): a prompt in, `text_completion` events out (or one whole
answer)."""

from __future__ import annotations

from harness.client.chunk import Chunk, json_object
from harness.client.dialects.base import Body, Dialect, chat_reader, exact_length, usage_of
from harness.client.dialects.chat import stream_options
from harness.client.typed_events import error_chunk, items, text
from harness.workload.requests import RequestSpec


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return exact_length({"model": model, "max_tokens": spec.max_tokens, "stream": True,
                         "stream_options": stream_options(continuous_usage), "prompt": spec.prompt}, spec)


def whole(answer: bytes) -> Chunk:
    """A completion asked for unstreamed: its text, usage and finish."""
    obj = json_object(answer, "completions answer")
    if "error" in obj:
        return error_chunk(obj["error"])
    choice = next(iter(items(obj, "choices")), {})
    finish = choice.get("finish_reason")
    chunk = Chunk(whole=True, has_content=text(choice.get("text")) is not None, text=text(choice.get("text")),
                  finish_reason=finish if isinstance(finish, str) else None)
    return usage_of(chunk, obj.get("usage"), answer, "prompt_tokens", "completion_tokens", "usage")


DIALECT = Dialect("completions", "completions", (b"text_completion",), body, chat_reader, whole=whole)
