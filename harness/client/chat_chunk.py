"""What one chat or completions stream chunk says, parsed without any I/O: `interpret` turns an OpenAI chunk's
payload into what the harness measures, with fast paths for a plain token (two regex searches, no JSON parse)
checked against the full parse (`_parse`) by tests/unit/test_fuzz.py."""

from __future__ import annotations

import re

import orjson

from harness.client.chunk import Chunk, json_object, usage_count
from harness.errors import BadChunk

DONE = b"[DONE]"

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
