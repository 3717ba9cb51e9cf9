"""OpenAI's chat completions (`/v1/chat/completions`): the messages in, `chat.completion.chunk` events out."""

from __future__ import annotations

from harness.client.dialects.base import Body, Dialect, Part, chat_reader, exact_length, one_turn
from harness.workload.requests import RequestSpec


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return exact_length({"model": model, "max_tokens": spec.max_tokens, "stream": True,
                         "stream_options": stream_options(continuous_usage), "messages": one_turn(spec, image)},
                        spec)


def image(url: str) -> Part:
    return {"type": "image_url", "image_url": {"url": url}}


def stream_options(continuous_usage: bool) -> dict[str, bool]:
    """Usage at the end of the stream; with `continuous_usage`, on every chunk (vLLM), so tokens per chunk are known."""
    return {"include_usage": True, "continuous_usage_stats": True} if continuous_usage else {"include_usage": True}


DIALECT = Dialect("chat", "chat/completions", (b"chat.completion",), body, chat_reader, takes_images=True)
