"""The Responses API as the simulator speaks it: the prompt a request's `input` gives, and the stream as vLLM
and OpenAI write it — typed, named events, pre-rendered around each token.

`response.created`; a reasoning item's `response.reasoning_text.delta` events when the model thinks first; the
message item (`output_item.added`, `content_part.added`, one `response.output_text.delta` a token, the `.done`
events); then `response.completed`, carrying the usage and the whole output. Every event has its
`sequence_number`, counted from 0.
"""

from __future__ import annotations

import json
from typing import Any

from harness.sim.openai_shapes import Json, answer_text, token_json
from harness.sim.requests import chat_prompt


def responses_prompt(body: Json) -> str:
    """The Responses API's `input` (a string, or items with a role and content) after its `instructions`."""
    given = body.get("input")
    head = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    if isinstance(given, str):
        return " ".join([*head, given])
    return " ".join([*head, chat_prompt(body, "input")])


def event(kind: str, seq: int, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": seq, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


class ResponsesRenderer:
    def __init__(self, response_id: str, model: str, created: int, reasoning: int = 0, prompt_tokens: int = 0) -> None:
        self.id, self.model, self.created, self.reasoning = response_id, model, created, reasoning
        self._message = f"msg_{response_id}"
        self._thought = f"rs_{response_id}"
        self._answer_at = 1 if reasoning else 0  # the message's output index
        self._seq = 0
        self._pre = self._delta_pre("response.output_text.delta", self._message, self._answer_at)
        self._pre_thinking = self._delta_pre("response.reasoning_text.delta", self._thought, 0)

    @staticmethod
    def _delta_pre(kind: str, item: str, index: int) -> bytes:
        return (f'event: {kind}\ndata: {{"type":"{kind}","item_id":"{item}","output_index":{index},'
                f'"content_index":0,"delta":').encode()

    def _next(self) -> int:
        self._seq += 1
        return self._seq - 1

    def _response(self, status: str, output: list[Json], usage: Json | None) -> Json:
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "usage": usage, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None}

    def _item_added(self, item: Json, index: int) -> bytes:
        return event("response.output_item.added", self._next(), output_index=index, item=item)

    def _message_opened(self) -> bytes:
        item = {"id": self._message, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return (self._item_added(item, self._answer_at)
                + event("response.content_part.added", self._next(), item_id=self._message,
                        output_index=self._answer_at, content_index=0, part=part))

    def _reasoning_item(self, status: str, thought: str | None) -> Json:
        content = [{"type": "reasoning_text", "text": thought}] if thought is not None else []
        return {"id": self._thought, "type": "reasoning", "summary": [], "content": content, "status": status}

    def opening(self) -> bytes:
        head = event("response.created", self._next(), response=self._response("in_progress", [], None))
        if self.reasoning:
            return head + self._item_added(self._reasoning_item("in_progress", None), 0)
        return head + self._message_opened()

    def tokens(self, first: int, count: int, usage_prompt_tokens: int | None = None,
               finish: str | None = None) -> bytes:
        frames = []
        for i in range(first, first + count):
            if i == self.reasoning and i:  # the model stops thinking: its reasoning item closes, the message opens
                frames.append(event("response.output_item.done", self._next(), output_index=0,
                                    item=self._reasoning_item("completed", answer_text(0, self.reasoning))))
                frames.append(self._message_opened())
            pre = self._pre_thinking if i < self.reasoning else self._pre
            frames.append(pre + token_json(i) + b',"logprobs":[],"sequence_number":%d}\n\n' % self._next())
        return b"".join(frames)

    def closing(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None,
                include_usage: bool, finish: str) -> list[bytes]:
        text = answer_text(self.reasoning, completion_tokens)
        part = {"type": "output_text", "text": text, "annotations": []}
        message = {"id": self._message, "type": "message", "role": "assistant", "status": "completed",
                   "content": [part]}
        where = {"item_id": self._message, "output_index": self._answer_at, "content_index": 0}
        output = [self._reasoning_item("completed", answer_text(0, self.reasoning)), message] if self.reasoning \
            else [message]
        status = "completed" if finish != "length" else "incomplete"
        done = self._response(status, output, usage(prompt_tokens, completion_tokens, cached_tokens,
                                                     min(self.reasoning, completion_tokens)))
        if status == "incomplete":
            done["incomplete_details"] = {"reason": "max_output_tokens"}
        return [event("response.output_text.done", self._next(), **where, text=text, logprobs=[]),
                event("response.content_part.done", self._next(), **where, part=part),
                event("response.output_item.done", self._next(), output_index=self._answer_at, item=message),
                event(f"response.{status}", self._next(), response=done)]

    def whole(self, text: str, reason: str, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int | None) -> Json:
        message = {"id": self._message, "type": "message", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": text, "annotations": []}]}
        whole = self._response("completed", [message], usage(prompt_tokens, completion_tokens, cached_tokens, 0))
        if reason == "length":  # stopped at max_output_tokens, as OpenAI's API says it
            whole.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        return whole


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None, reasoning: int) -> Json:
    """The Responses API's usage; the cached share only where the server says it
    (`--enable-prompt-tokens-details`), as chat's: a 0 it did not measure would read as a cold cache."""
    out: Json = {"input_tokens": prompt_tokens, "output_tokens": completion_tokens,
                           "output_tokens_details": {"reasoning_tokens": reasoning},
                           "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        out["input_tokens_details"] = {"cached_tokens": cached_tokens}
    return out
