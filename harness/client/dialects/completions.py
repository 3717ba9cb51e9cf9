"""OpenAI's (legacy) completions (`/v1/completions`): a prompt in, `text_completion` events out."""

from __future__ import annotations

from harness.client.dialects.base import Body, Dialect, chat_reader, exact_length
from harness.client.dialects.chat import stream_options
from harness.workload.requests import RequestSpec


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return exact_length({"model": model, "max_tokens": spec.max_tokens, "stream": True,
                         "stream_options": stream_options(continuous_usage), "prompt": spec.prompt}, spec)


DIALECT = Dialect("completions", "completions", (b"text_completion",), body, chat_reader)
