"""Anthropic's Messages API (`/v1/messages`), as gateways and vLLM serve it in front of open models: named
events.

`message_start` (the prompt's usage), `content_block_start`, `content_block_delta` events (`text_delta`: the
answer; `thinking_delta`: reasoning; `input_json_delta`: a tool call's arguments), `content_block_stop`,
`message_delta` (the stop reason and the output's usage), `message_stop`; `ping` at any time, `error` for a
failure mid-stream. The key goes in `x-api-key`, with the `anthropic-version` header.
"""

from __future__ import annotations

from harness.client.chunk import Chunk, json_object, usage_count
from harness.client.dialects.base import Body, Dialect, Part, StreamReader, exact_length, one_turn, usage_of
from harness.client.typed_events import EventReader, error_chunk, event_object, items, section, text
from harness.workload.requests import RequestSpec

STOP = "message_stop"
VERSION = "2023-06-01"  # the one version of the Messages API Anthropic has published
# Anthropic's stop reasons in OpenAI's words, so a `length` stop is judged the same whichever API said it.
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_DELTA_KEYS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    turns = one_turn(spec, _image)
    system = [str(t["content"]) for t in turns if t["role"] == "system"]  # top level here, not a message
    out: Body = {"model": model, "max_tokens": spec.max_tokens, "stream": True,
                 "messages": [t for t in turns if t["role"] != "system"]}
    if system:
        out["system"] = "\n".join(system)
    return exact_length(out, spec)


def _image(url: str) -> Part:
    """A data: URL as Anthropic's base64 image block."""
    head, _, data = url.partition(",")
    return {"type": "image", "source": {"type": "base64", "media_type": head.removeprefix("data:").split(";")[0],
                                        "data": data}}


def interpret(name: bytes, payload: bytes) -> Chunk:
    kind, obj = event_object(name, payload)
    if kind == "content_block_delta":
        delta = section(obj, "delta")
        key = _DELTA_KEYS.get(str(delta.get("type")))
        piece = text(delta.get(key)) if key else None
        if piece is None:
            return Chunk()
        if key == "thinking":
            return Chunk(has_reasoning=True)
        return Chunk(has_content=True, text=piece)
    if kind == "message_start":
        usage = section(section(obj, "message"), "usage")
        return Chunk(prompt_tokens=usage_count(usage, "input_tokens", payload, "message.usage"),
                     cached_tokens=usage_count(usage, "cache_read_input_tokens", payload, "message.usage"))
    if kind == "message_delta":
        stop = section(obj, "delta").get("stop_reason")
        usage = section(obj, "usage")
        return Chunk(finish_reason=FINISH.get(stop, stop) if isinstance(stop, str) else None,
                     completion_tokens=usage_count(usage, "output_tokens", payload, "usage"),
                     prompt_tokens=usage_count(usage, "input_tokens", payload, "usage"))
    if kind == STOP:
        return Chunk(done=True)
    if kind == "error":
        error = section(obj, "error")
        return Chunk(error=str(error.get("message") or error.get("type") or "error event"))
    return Chunk()  # ping, content_block_start, content_block_stop: no token


def whole(answer: bytes) -> Chunk:
    """A message asked for unstreamed: its content blocks (thinking apart), usage and stop reason."""
    obj = json_object(answer, "Messages API answer")
    if obj.get("type") == "error" or "error" in obj:
        return error_chunk(obj.get("error"))
    blocks = items(obj, "content")
    stop = obj.get("stop_reason")
    chunk = Chunk(whole=True, has_content=any(b.get("type") in ("text", "tool_use") for b in blocks),
                  has_reasoning=any(b.get("type") == "thinking" for b in blocks),
                  finish_reason=FINISH.get(stop, stop) if isinstance(stop, str) else None)
    return usage_of(chunk, obj.get("usage"), answer, "input_tokens", "output_tokens", "usage")


def reader(keep_text: bool) -> StreamReader:
    return EventReader(interpret, STOP)


DIALECT = Dialect("messages", "messages", (), body, reader, key_header="x-api-key",
                  headers={"anthropic-version": VERSION}, end=STOP, takes_images=True, whole=whole)
