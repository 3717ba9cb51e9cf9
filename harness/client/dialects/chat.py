"""OpenAI's chat completions (`/v1/chat/completions`): the messages in, `chat.completion.chunk` events out."""

from __future__ import annotations

from harness.client.chunk import Chunk, json_object
from harness.client.dialects.base import Body, Dialect, Part, chat_reader, exact_length, one_turn, usage_of
from harness.client.typed_events import error_chunk, items, section, text
from harness.workload.requests import RequestSpec


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return exact_length({"model": model, "max_tokens": spec.max_tokens, "stream": True,
                         "stream_options": stream_options(continuous_usage), "messages": one_turn(spec, image)},
                        spec)


def image(url: str) -> Part:
    return {"type": "image_url", "image_url": {"url": url}}


def stream_options(continuous_usage: bool) -> dict[str, bool]:
    """Usage at the end of the stream; with `continuous_usage`, on every chunk (vLLM), so tokens per chunk are
    known."""
    return {"include_usage": True, "continuous_usage_stats": True} if continuous_usage else {"include_usage": True}


def whole(answer: bytes) -> Chunk:
    """A chat completion asked for unstreamed: its message (thinking apart), usage and finish."""
    obj = json_object(answer, "chat answer")
    if "error" in obj:
        return error_chunk(obj["error"])
    choice = next(iter(items(obj, "choices")), None)
    message = section(choice, "message")
    chunk = Chunk(whole=True, has_content=bool(text(message.get("content")) or message.get("tool_calls")),
                  has_reasoning=bool(text(message.get("reasoning_content")) or text(message.get("reasoning"))),
                  finish_reason=str(choice.get("finish_reason")) if isinstance(choice, dict) else None,
                  text=text(message.get("content")))
    return usage_of(chunk, obj.get("usage"), answer, "prompt_tokens", "completion_tokens", "usage")


DIALECT = Dialect("chat", "chat/completions", (b"chat.completion",), body, chat_reader, takes_images=True,
                  whole=whole)
