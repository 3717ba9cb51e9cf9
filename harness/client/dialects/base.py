"""What one API of an OpenAI-compatible server is to the harness: a `Dialect`.

A dialect says where a request goes under the base URL, the JSON body a `RequestSpec` becomes, and how its
answer reads — a stream's events as `Chunk`s (a token of the answer, of reasoning or of a tool call; usage;
finish; an error), or a whole answer at once. Everything else of the harness (the clients, the worker, the
statistics) is the same for every dialect. Adding one is a module in this package and a line in its registry
(`harness.client.dialects`); docs/architecture.md walks through the Responses API's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.client.chunk import Chunk, usage_count
from harness.client.sse import ChunkReader
from harness.workload.requests import RequestSpec

Body = dict[str, Any]


class StreamReader(Protocol):
    """Body bytes in, the chunks they complete out (`ChunkReader` is chat's and completions'; `harness.client.
    typed_events` holds the others)."""

    first: bytes | None  # the answer's first payload: whose answer this is (`harness.client.belongs`)
    end: str  # the event that ends a whole stream, as a cut-short stream's reason names it
    streams: bool  # an event stream is expected (False: an answer that comes whole, as JSON)

    def plain(self, data: bytes) -> bool:
        """One plain token alone in its read taken the short way (True), or nothing taken (False)."""

    def framed(self, data: bytes) -> bool:
        """`plain` for one whole HTTP chunk, its framing included."""

    def read(self, data: bytes) -> Sequence[Chunk]: ...

    def finish(self) -> Sequence[Chunk]:
        """What the body's end completes: a whole answer's one chunk; nothing for a stream."""


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str  # what `--api` and the scenario's `endpoint.api` call it
    path: str  # under the base URL (…/v1)
    objects: tuple[bytes, ...]  # what its answers' `object` fields start with: another's is a foreign answer
    body: Callable[[RequestSpec, str, bool], Body]  # (spec, model, continuous usage) -> the request's JSON
    reader: Callable[[bool], StreamReader]  # (keep the answer's text) -> a reader for one answer
    key_header: str = "Authorization"  # where the API key goes unless the user names a header
    headers: Mapping[str, str] = field(default_factory=dict)  # sent on every request (Anthropic's version)
    end: str = "[DONE]"
    packs_batches: bool = False  # a quick run's `--batch B` is one request of B texts (embeddings), not B requests
    generates: bool = True  # its answers are generated tokens (False: embeddings; `harness predict` models only these)
    takes_images: bool = False  # images go with a prompt (workload.images)
    whole: Callable[[bytes], Chunk] | None = None  # its answer asked for unstreamed (`endpoint.stream: false`)


def usage_of(chunk: Chunk, usage: object, payload: bytes, prompt: str, completion: str, where: str) -> Chunk:
    """`chunk` with the prompt and completion counts of a `usage` object under the API's names."""
    if isinstance(usage, dict):
        chunk.prompt_tokens = usage_count(usage, prompt, payload, where)
        chunk.completion_tokens = usage_count(usage, completion, payload, where)
    return chunk


def chat_reader(keep_text: bool) -> StreamReader:
    """Chat's and completions' reader: OpenAI chunks, with the fast path for a plain token."""
    return ChunkReader(keep_text)


Part = dict[str, object]


def one_turn(spec: RequestSpec, image: Callable[[str], Part] | None = None,
             text: Callable[[str], Part] = lambda t: {"type": "text", "text": t}) -> list[dict[str, object]]:
    """The spec's conversation as role/content messages (one user turn unless a dataset gave a history); its
    images, as `image` makes each one's part, after the text of the last turn (`text` makes that part)."""
    turns = spec.messages or (("user", spec.prompt),)
    out: list[dict[str, object]] = [{"role": role, "content": content} for role, content in turns]
    if spec.images and image is not None:
        out[-1]["content"] = [text(str(out[-1]["content"])), *(image(url) for url in spec.images)]
    return out


def exact_length(body: Body, spec: RequestSpec) -> Body:
    """vLLM's and SGLang's extensions, when the spec asks for exactly `max_tokens`: every run asks the same
    work."""
    if spec.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = spec.max_tokens
    return body
