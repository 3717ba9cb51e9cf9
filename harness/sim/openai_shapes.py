"""OpenAI-shaped response bodies and stream chunks, pre-rendered per request for speed."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from harness.tokens import VOCAB_SIZE, token_text

Json = dict[str, Any]  # a JSON object as a request brought it or an answer writes it: free-form, as the wire is


def error_response(
    status: int, message: str, err_type: str, param: str | None = None, code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


_TOKEN_JSON = [json.dumps(token_text(i)).encode() for i in range(VOCAB_SIZE)]


def token_json(position: int) -> bytes:
    """The token at `position` of every simulated answer, as a JSON string."""
    return _TOKEN_JSON[position % VOCAB_SIZE]


def answer_text(first: int, end: int) -> str:
    """The text of a simulated answer's tokens `first`..`end - 1`."""
    return "".join(token_text(i) for i in range(first, end))


class ChunkRenderer:
    """Renders the SSE frames of one streamed response; the JSON around each token is built once."""

    def __init__(self, chat: bool, response_id: str, model: str, created: int, reasoning: int = 0,
                 prompt_tokens: int = 0) -> None:
        """`reasoning`: the answer's first tokens that are a reasoning model's thinking, streamed as vLLM's
        and SGLang's reasoning parsers stream them (`delta.reasoning_content`; chat only)."""
        self.chat = chat
        self.id, self.model, self.created = response_id, model, created
        self.reasoning = reasoning if chat else 0
        head = {"id": response_id, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": model}
        self._head = head
        prefix = json.dumps(head, separators=(",", ":"))[:-1]
        if chat:
            self._pre = self._answer = f'data: {prefix},"choices":[{{"index":0,"delta":{{"content":'.encode()
            self._thinking = f'data: {prefix},"choices":[{{"index":0,"delta":{{"reasoning_content":'.encode()
            self._post = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self._pre = self._answer = self._thinking = f'data: {prefix},"choices":[{{"index":0,"text":'.encode()
            self._post = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def _frame(self, obj: Json) -> bytes:
        return b"data: " + json.dumps({**self._head, **obj}, separators=(",", ":")).encode() + b"\n\n"

    def opening(self) -> bytes:
        """Chat's first chunk, the assistant's role with no token; nothing on completions."""
        if not self.chat:
            return b""
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None}
        return self._frame({"choices": [choice]})

    def closing(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None,
                include_usage: bool, finish: str) -> list[bytes]:
        """The finish_reason went out on the last token's chunk: then usage (when asked) and [DONE], as
        vLLM."""
        usage = [self.usage(prompt_tokens, completion_tokens, cached_tokens)] if include_usage else []
        return [*usage, b"data: [DONE]\n\n"]

    def whole(self, text: str, reason: str, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int | None) -> Json:
        return full_response(self.chat, self.id, self.model, self.created, text, reason, prompt_tokens,
                             completion_tokens, cached_tokens)

    def tokens(self, first: int, count: int, usage_prompt_tokens: int | None = None,
               finish: str | None = None) -> bytes:
        """Frames for tokens first..first+count-1; with `usage_prompt_tokens`, each carries running usage;
        with `finish`, the last carries that finish_reason (as vLLM sends it: on the last token's chunk)."""
        post = self._post
        if first + count <= self.reasoning:
            self._pre = self._thinking
        elif first >= self.reasoning:
            self._pre = self._answer
        else:  # the turn from thinking to answering falls inside these frames
            return self._turn(first, count, usage_prompt_tokens, finish)
        if usage_prompt_tokens is None:
            if count == 1 and finish is None:  # the common case, once per request per step: no join, no generator
                return self._pre + token_json(first) + post
            frames = [self._pre + token_json(i) + post for i in range(first, first + count)]
        else:
            head = post[: -len(b"]}\n\n")]
            frames = [self._pre + json.dumps(token_text(i)).encode() + head + b'],"usage":'
                      + json.dumps(usage(usage_prompt_tokens, i + 1, None, self._thought(i + 1)),
                                   separators=(",", ":")).encode() + b"}\n\n"
                      for i in range(first, first + count)]
        if finish is not None:
            reason = b'"finish_reason":' + json.dumps(finish).encode()
            frames[-1] = frames[-1].replace(b'"finish_reason":null', reason, 1)
        return b"".join(frames)

    def _turn(self, first: int, count: int, usage_prompt_tokens: int | None, finish: str | None) -> bytes:
        thinking = self.reasoning - first
        return (self.tokens(first, thinking, usage_prompt_tokens)
                + self.tokens(self.reasoning, count - thinking, usage_prompt_tokens, finish))

    def _thought(self, completion_tokens: int) -> int | None:
        return min(self.reasoning, completion_tokens) if self.reasoning else None

    def usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> bytes:
        return self._frame({"choices": [], "usage": usage(prompt_tokens, completion_tokens, cached_tokens,
                                                          self._thought(completion_tokens))})


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None,
          reasoning_tokens: int | None = None) -> Json:
    """OpenAI's usage object; with `cached_tokens`, its `prompt_tokens_details` (vLLM with
    --enable-prompt-tokens-details); with `reasoning_tokens`, its `completion_tokens_details` (OpenAI's
    reasoning models)."""
    out: Json = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return out


def full_response(
    chat: bool, response_id: str, model: str, created: int, text: str, reason: str,
    prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None,
) -> Json:
    if chat:
        choice: Json = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "logprobs": None, "finish_reason": reason}
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
    return {"id": response_id, "object": "chat.completion" if chat else "text_completion",
            "created": created, "model": model, "choices": [choice],
            "usage": usage(prompt_tokens, completion_tokens, cached_tokens)}
