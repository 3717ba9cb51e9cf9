"""OpenAI's Responses API (`/v1/responses`): `input` in, typed events out.

Streamed, an answer is `response.created`, then `response.output_text.delta` events (the answer), reasoning
deltas (`response.reasoning_text.delta`, or a summary's), a tool call's
`response.function_call_arguments.delta`, and one last event: `response.completed` (with the usage),
`response.incomplete` (stopped at `max_output_tokens`), `response.failed` or `error`. There is no `[DONE]`.
"""

from __future__ import annotations

from harness.client.chunk import Chunk, json_object, usage_count
from harness.client.dialects.base import Body, Dialect, Part, StreamReader, exact_length, one_turn
from harness.client.typed_events import (
    EventReader,
    error_chunk,
    event_object,
    items,
    section,
    text,
)
from harness.workload.requests import RequestSpec

COMPLETED = "response.completed"


def body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    # One user turn goes as a plain string, as most callers send it; a history, or images, as role/content
    # items.
    given = one_turn(spec, _image, _text) if spec.messages or spec.images else spec.prompt
    return exact_length({"model": model, "input": given, "max_output_tokens": spec.max_tokens, "stream": True},
                        spec)


def _image(url: str) -> Part:
    return {"type": "input_image", "image_url": url}


def _text(text: str) -> Part:
    return {"type": "input_text", "text": text}


def interpret(name: bytes, payload: bytes) -> Chunk:
    kind, obj = event_object(name, payload)
    if kind.endswith(".delta"):
        delta = text(obj.get("delta"))
        if delta is None:
            return Chunk()
        if kind.startswith("response.reasoning"):  # reasoning_text, reasoning_summary_text
            return Chunk(has_reasoning=True)
        return Chunk(has_content=True, text=delta)  # output_text, function_call_arguments, refusal
    if kind in (COMPLETED, "response.incomplete"):
        return _ended(obj, payload)
    if kind == "response.failed":
        error = section(section(obj, "response"), "error")
        return Chunk(error=str(error.get("message") or error.get("code") or "response.failed"))
    if kind == "error":
        return Chunk(error=str(obj.get("message") or obj.get("code") or "error event"))
    return Chunk()  # created, in_progress, output_item.added, content_part.done, …: no token


def _ended(obj: dict[str, object], payload: bytes) -> Chunk:
    """The last event: the response's usage, and `length` where it stopped at `max_output_tokens` — OpenAI
    says so with a `response.incomplete` event, vLLM with `response.completed` whose status is
    `incomplete`."""
    response = section(obj, "response")
    usage = section(response, "usage")
    cut = obj.get("type") == "response.incomplete" or response.get("status") == "incomplete"
    chunk = Chunk(done=True, finish_reason="length" if cut else "stop")
    chunk.prompt_tokens = usage_count(usage, "input_tokens", payload, "response.usage")
    chunk.completion_tokens = usage_count(usage, "output_tokens", payload, "response.usage")
    chunk.reasoning_tokens = usage_count(section(usage, "output_tokens_details"), "reasoning_tokens", payload,
                                         "response.usage.output_tokens_details")
    chunk.cached_tokens = usage_count(section(usage, "input_tokens_details"), "cached_tokens", payload,
                                      "response.usage.input_tokens_details")
    return chunk


def whole(answer: bytes) -> Chunk:
    """A response asked for unstreamed: its output items (a message's text, reasoning), usage and status."""
    obj = json_object(answer, "Responses API answer")
    if obj.get("error"):
        return error_chunk(obj["error"])
    output = items(obj, "output")
    said = any(text(part.get("text")) for item in output if item.get("type") == "message"
               for part in items(item, "content"))
    chunk = _ended({"response": obj}, answer)
    chunk.done, chunk.whole = False, True
    chunk.has_content = said or any(item.get("type") == "function_call" for item in output)
    chunk.has_reasoning = any(item.get("type") == "reasoning" for item in output)
    return chunk


def reader(keep_text: bool) -> StreamReader:
    return EventReader(interpret, COMPLETED)


DIALECT = Dialect("responses", "responses", (b"response",), body, reader, end=COMPLETED, takes_images=True,
                  whole=whole)
