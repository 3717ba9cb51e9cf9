"""The seam between the load engine and the wire: what a backend is told, and what it tells back.

A backend turns one request into events, in order: `sent` (the request reached its connection),
`status` (the response's HTTP status), `chunks` (stream chunks that arrived together), then either
`ended` (the body ended) or `failed` (a status and a short reason). It never reads a clock and never
touches a record: the worker that listens stamps each event with the one clock and closes the record.
Request failures are events, never exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.client.sse import Chunk, ChunkReader
from harness.records import Status
from harness.workload.requests import RequestSpec

Api = Literal["chat", "completions"]


class RequestEvents(Protocol):
    got_token: bool  # a token-bearing chunk has arrived (ends the first-token timeout)
    done: bool  # the stream is over for the harness: [DONE], an error, its end or a failure
    keep_text: bool  # the answer's text is wanted (multi-turn sessions): chunks should carry it

    def token(self) -> bool:
        """One plain token arrived alone in its read (`ChunkReader.plain`): `chunks` of one content chunk; True
        once the stream is over for the harness (too many tokens)."""

    def media(self, content_type: str) -> None:
        """The answer (status 200) came with this Content-Type, which is not text/event-stream."""

    def connecting(self) -> None:
        """No pooled connection was free: a new one is being opened for this request."""

    def sent(self) -> None: ...

    def status(self, http_status: int) -> None: ...

    def chunks(self, chunks: Sequence[Chunk]) -> bool:
        """Chunks that arrived together; True once the stream is over for the harness ([DONE] or an error)."""

    def failed(self, status: Status, reason: str, message: str = "") -> None:
        """`reason`: a short cause; `message`: the server's own words, when it gave any."""

    def retried(self) -> None:
        """The request is sent again: the first connection died before the server answered a byte."""

    def ended(self) -> None:
        """The body ended: without [DONE] the stream was cut short."""


class Backend(Protocol):
    def prepare(self, spec: RequestSpec) -> None:
        """Do the work of building the request ahead of its deadline (optional)."""

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        """Send `spec` and report what happens to `events`. Never raises for request failures."""


class PooledBackend(Backend, Protocol):
    """A backend that owns its connections: the runner opens them before a phase and closes them at the end."""

    async def warm(self, count: int) -> int: ...

    async def close(self) -> None: ...


# How long a connection opened ahead of a phase has to answer a GET before it is closed instead of pooled.
WARM_ANSWER_S = 2.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str  # e.g. http://127.0.0.1:8000/v1
    model: str
    api: Api = "chat"
    api_key: str | None = field(default=None, repr=False)  # never printed or saved

    @property
    def url(self) -> str:
        path = "chat/completions" if self.api == "chat" else "completions"
        return f"{self.base_url.rstrip('/')}/{path}"


def take(reader: ChunkReader, events: RequestEvents, body: bytes) -> bool:
    """A piece of the response body to `events`; True once the stream is over for the harness. One plain token
    alone in its read, the usual piece, goes the short way."""
    if reader.plain(body):
        return events.token()
    return events.chunks(reader.read(body))


def request_body(spec: RequestSpec, model: str, api: Api, continuous_usage: bool = False) -> dict[str, Any]:
    options: dict[str, bool] = {"include_usage": True}
    if continuous_usage:
        options["continuous_usage_stats"] = True  # vLLM: usage on every chunk, so tokens per chunk are known
    body: dict[str, Any] = {"model": model, "max_tokens": spec.max_tokens, "stream": True, "stream_options": options}
    if api == "chat":
        turns = spec.messages or (("user", spec.prompt),)
        body["messages"] = [{"role": role, "content": content} for role, content in turns]
    else:
        body["prompt"] = spec.prompt
    if spec.ignore_eos:
        # vLLM/SGLang extensions: exactly max_tokens tokens, so every run asks for the same work.
        body["ignore_eos"] = True
        body["min_tokens"] = spec.max_tokens
    return body


def redirect(status: int, location: str) -> tuple[str, str] | None:
    """A 3xx answer as (reason, message): never followed — a POST turned into a GET elsewhere is not the request
    asked for, and its 404 would hide where the endpoint went."""
    if not 300 <= status < 400:
        return None
    return (f"HTTP {status} redirect", f"redirect to {location[:200] or '(no Location)'}, not followed: point "
            "--endpoint at the final URL")


def error_reason(status: int, body: bytes) -> str:
    """A short, low-cardinality cause: the status and the OpenAI error type when there is one."""
    try:
        err_type = json.loads(body)["error"]["type"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested thousands deep
        return f"HTTP {status}"
    return f"HTTP {status} {err_type}"


def error_message(body: bytes) -> str:
    """The server's own sentence: `error.message` of an OpenAI-shaped error, else the body's text."""
    try:
        err = json.loads(body)["error"]
        message = err.get("message") if isinstance(err, dict) else err
        if isinstance(message, str):
            return message
    except (ValueError, KeyError, TypeError, RecursionError):
        pass
    return body.decode("utf-8", "replace").strip()
