"""The APIs the simulator answers, one entry each: where, how its body says the prompt and the answer's cap,
and how its answer is written (a renderer: the stream's opening, each token's event, its closing, a whole
answer).

The harness's own registry (`harness.client.dialects`) reads these APIs; this one writes them. They share
nothing but the wire, and `tests/unit/test_sim_dialects.py` checks that every API the harness speaks is
answered here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from harness.sim import embeddings
from harness.sim.messages_shapes import MessagesRenderer, messages_prompt
from harness.sim.openai_shapes import ChunkRenderer, Json
from harness.sim.requests import chat_prompt, completion_prompt
from harness.sim.responses_shapes import ResponsesRenderer, responses_prompt


class Renderer(Protocol):
    def opening(self) -> bytes: ...

    def tokens(self, first: int, count: int, usage_prompt_tokens: int | None = None,
               finish: str | None = None) -> bytes: ...

    def closing(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None,
                include_usage: bool, finish: str) -> list[bytes]: ...

    def whole(self, text: str, reason: str, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int | None) -> Json: ...


# (answer id, model, created, reasoning tokens, prompt tokens) -> the renderer of one answer
MakeRenderer = Callable[[str, str, int, int, int], Renderer]


@dataclass(frozen=True, slots=True)
class Spoken:
    name: str
    path: str  # under /v1
    prompt: Callable[[Json], str]
    param: str  # the field a prompt past the context is blamed on
    render: MakeRenderer | None  # None: answered whole, by its own route (embeddings)
    id_prefix: str
    max_fields: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
    whole_context: bool = True  # no cap given: the context left (False: the completions default of 16)
    reasoning: bool = True  # a reasoning model's thinking is streamed as this API streams it


def _chat(rid: str, model: str, created: int, reasoning: int, prompt_tokens: int) -> Renderer:
    return ChunkRenderer(True, rid, model, created, reasoning, prompt_tokens)


def _completions(rid: str, model: str, created: int, reasoning: int, prompt_tokens: int) -> Renderer:
    return ChunkRenderer(False, rid, model, created, 0, prompt_tokens)


SPOKEN: dict[str, Spoken] = {s.name: s for s in (
    Spoken("chat", "chat/completions", chat_prompt, "messages", _chat, "chatcmpl"),
    Spoken("completions", "completions", completion_prompt, "prompt", _completions, "cmpl", whole_context=False,
           reasoning=False),
    Spoken("responses", "responses", responses_prompt, "input", ResponsesRenderer, "resp",
           max_fields=("max_output_tokens",)),
    Spoken("messages", "messages", messages_prompt, "messages", MessagesRenderer, "msg", max_fields=("max_tokens",)),
    Spoken("embeddings", "embeddings", embeddings.prompt, "input", None, "embd", reasoning=False),
)}
