"""Anthropic's Messages API as the simulator speaks it: the prompt (`system` and `messages`), and the stream
as gateways in front of open models write it — named events, one `content_block_delta` a token, a thinking
block first when the model thinks."""

from __future__ import annotations

import json
from typing import Any

from harness.sim.openai_shapes import Json, token_json
from harness.sim.requests import chat_prompt, parts_text

# OpenAI's finish reasons in Anthropic's words.
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def messages_prompt(body: Json) -> str:
    """Anthropic's `messages` after its top-level `system` (a string, or text blocks)."""
    system = " ".join(parts_text(body.get("system"), "system"))
    return " ".join(filter(None, (system, chat_prompt(body))))


def event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, separators=(',', ':'))}\n\n".encode()


def _delta_pre(index: int, kind: str, key: str) -> bytes:
    return (f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},'
            f'"delta":{{"type":"{kind}","{key}":').encode()


class MessagesRenderer:
    def __init__(self, message_id: str, model: str, created: int, reasoning: int = 0, prompt_tokens: int = 0) -> None:
        self.id, self.model, self.reasoning = message_id, model, reasoning
        self._prompt_tokens = prompt_tokens  # said at the start, as Anthropic's message_start does
        self._text_at = 1 if reasoning else 0  # the text block's index
        self._pre = _delta_pre(self._text_at, "text_delta", "text")
        self._pre_thinking = _delta_pre(0, "thinking_delta", "thinking")

    def _message(self, content: list[Json], stop: str | None, prompt: int, output: int,
                 cached: int | None) -> Json:
        usage = {"input_tokens": prompt, "output_tokens": output}
        if cached is not None:  # only where the server says it, as chat's `cached_tokens`
            usage["cache_read_input_tokens"] = cached
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop, "stop_sequence": None, "usage": usage}

    def opening(self) -> bytes:
        thinking = {"type": "thinking", "thinking": "", "signature": ""}
        first = thinking if self.reasoning else {"type": "text", "text": ""}
        return (event("message_start", message=self._message([], None, self._prompt_tokens, 1, None))
                + event("content_block_start", index=0, content_block=first))

    def tokens(self, first: int, count: int, usage_prompt_tokens: int | None = None,
               finish: str | None = None) -> bytes:
        frames = []
        for i in range(first, first + count):
            if i == self.reasoning and i:  # the thinking block closes, the text block opens
                frames.append(event("content_block_stop", index=0))
                frames.append(event("content_block_start", index=1, content_block={"type": "text", "text": ""}))
            frames.append((self._pre_thinking if i < self.reasoning else self._pre) + token_json(i) + b"}}\n\n")
        return b"".join(frames)

    def closing(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None,
                include_usage: bool, finish: str) -> list[bytes]:
        usage = {"output_tokens": completion_tokens}
        return [event("content_block_stop", index=self._text_at if completion_tokens > self.reasoning else 0),
                event("message_delta", delta={"stop_reason": STOP_REASONS.get(finish, finish), "stop_sequence": None},
                      usage=usage),
                event("message_stop")]

    def whole(self, text: str, reason: str, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int | None) -> Json:
        return self._message([{"type": "text", "text": text}], STOP_REASONS.get(reason, reason), prompt_tokens,
                             completion_tokens, cached_tokens)
