"""Parsing and validating OpenAI completion request bodies for the simulator.

Unknown fields are ignored, as real servers do; wrong types are a 400 naming the field.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.sim.engine import SimRequest
from harness.sim.kvcache import block_hashes
from harness.sim.openai_shapes import Json
from harness.tokens import token_text


class BadRequest(ValueError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    model: str
    prompt_words: list[str]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    prompt_crc: int
    chat: bool = False

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_words)


def _int_field(body: Json, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"'{name}' must be a non-negative integer", name)
    return value


def parts_text(content: object, field: str) -> list[str]:
    """A message's content: a string, or a list of parts whose `text` is taken (images and the rest carry
    none)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    if content is not None:
        raise BadRequest("message 'content' must be a string or a list of parts", field)
    return []


def chat_prompt(body: Json, field: str = "messages") -> str:
    messages = body.get(field)
    if not isinstance(messages, list) or not messages:
        raise BadRequest(f"'{field}' must be a non-empty list", field)
    parts: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise BadRequest("each message must be an object", field)
        parts.extend(parts_text(msg.get("content"), field))
    return " ".join(parts)


def completion_prompt(body: Json) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return " ".join(prompt)
    raise BadRequest("'prompt' must be a string or a list of strings", "prompt")


def parse_body(body: object, prompt_of: Callable[[Json], str] = chat_prompt,
               max_fields: tuple[str, ...] = ("max_completion_tokens", "max_tokens"),
               whole_context: bool = True) -> ParsedRequest:
    """`prompt_of`: the prompt's text by the API's fields; `max_fields`: the answer's cap, the first given
    wins (max_completion_tokens supersedes max_tokens, as in the OpenAI API); `whole_context`: no cap given
    means the context left (chat), not the completions default of 16."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str):
        raise BadRequest("'model' is required", "model")
    prompt = prompt_of(body)
    max_tokens = next((n for n in (_int_field(body, f) for f in max_fields) if n is not None), None)
    min_tokens = _int_field(body, "min_tokens") or 0
    # As vLLM does: a request that can produce nothing, or cannot meet its own minimum, is refused.
    if max_tokens is not None and max_tokens < 1:
        raise BadRequest(f"{max_fields[-1]} must be at least 1", max_fields[-1])
    if max_tokens is not None and min_tokens > max_tokens:
        raise BadRequest(f"min_tokens must be less than or equal to {max_fields[-1]}", "min_tokens")
    options = body.get("stream_options") or {}
    return ParsedRequest(
        model=model,
        prompt_words=prompt.split(),
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=isinstance(options, dict) and bool(options.get("include_usage", False)),
        continuous_usage=isinstance(options, dict) and bool(options.get("continuous_usage_stats", False)),
        prompt_crc=zlib.crc32(prompt.encode()),
        chat=whole_context,
    )


COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default on /v1/completions


def answer_cap(req: ParsedRequest, context_left: int, default_max: int | None) -> int:
    """The most tokens the answer may have: `max_tokens`, else the server's default — `default_max` when set,
    else vLLM 0.33's: 16 on /v1/completions, the whole context left on chat — never past the context left."""
    if req.max_tokens is not None:
        return min(req.max_tokens, context_left)
    if default_max is None:
        default_max = context_left if req.chat else COMPLETIONS_DEFAULT_MAX_TOKENS
    return min(default_max, context_left)


def finish_reason(output_tokens: int, req: ParsedRequest, context_left: int, default_max: int | None) -> str:
    """`length` when the answer ran to its cap (`max_tokens` or the end of the context), else `stop`."""
    return "length" if output_tokens >= answer_cap(req, context_left, default_max) else "stop"


def output_length(req: ParsedRequest, context_left: int, seed: int, default_max: int | None) -> int:
    """How many tokens the simulated model generates for this request.

    With `ignore_eos` exactly the maximum; otherwise a lognormal length (median 200) drawn from
    a generator seeded by the prompt, so the same request always gets the same answer length.
    """
    cap = answer_cap(req, context_left, default_max)
    if req.ignore_eos:
        return max(cap, 1)
    rng = np.random.default_rng([seed, req.prompt_crc])
    natural = int(rng.lognormal(np.log(200.0), 0.8))
    return max(1, min(max(natural, req.min_tokens), cap))


def make_request(request_id: str, prompt_words: list[str], output_tokens: int, arrival_ns: int) -> SimRequest:
    """An engine request whose KV blocks are hashed over its prompt and the answer it will give."""
    words = prompt_words + [token_text(i).strip() for i in range(output_tokens)]
    return SimRequest(request_id, len(prompt_words), output_tokens, arrival_ns, block_hashes=block_hashes(words))
