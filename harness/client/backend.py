"""The seam between the load engine and the wire: what a backend is told, and what it tells back.

A backend turns one request into events, in order: `sent` (the request reached its connection),
`status` (the response's HTTP status), `chunks` (stream chunks that arrived together), then either
`ended` (the body ended) or `failed` (a status and a short reason). It never reads a clock and never
touches a record: the worker that listens stamps each event with the one clock and closes the record.
Request failures are events, never exceptions.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.client.chunk import Chunk
from harness.client.dialects import dialect
from harness.client.dialects.base import Dialect, StreamReader
from harness.client.tls import client_tls
from harness.client.typed_events import WholeReader
from harness.client.urls import under
from harness.records import Status
from harness.redact import printable
from harness.workload.requests import RequestSpec


class RequestEvents(Protocol):
    got_token: bool  # a token-bearing chunk has arrived (ends the first-token timeout)
    done: bool  # the stream is over for the harness: [DONE], an error, its end or a failure
    keep_text: bool  # the answer's text is wanted (multi-turn sessions): chunks should carry it

    def token(self) -> bool:
        """One plain token arrived alone in its read (`ChunkReader.plain`): `chunks` of one content chunk;
        True once the stream is over for the harness (too many tokens)."""

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

    def ended(self, end: str = "[DONE]") -> None:
        """The body ended: without `end` (the API's last event) the stream was cut short."""


class Backend(Protocol):
    def prepare(self, spec: RequestSpec) -> None:
        """Do the work of building the request ahead of its deadline (optional)."""

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        """Send `spec` and report what happens to `events`. Never raises for request failures."""


class PooledBackend(Backend, Protocol):
    """A backend that owns its connections: the runner opens them before a phase and closes them at the
    end."""

    async def warm(self, count: int) -> int: ...

    async def close(self) -> None: ...


# How long a connection opened ahead of a phase has to answer a GET before it is closed instead of pooled.
WARM_ANSWER_S = 2.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str  # e.g. http://127.0.0.1:8000/v1, with a gateway's ?query when it wants one
    model: str
    api: str = "chat"  # a dialect's name (`harness.client.dialects`)
    api_key: str | None = field(default=None, repr=False)  # never printed or saved
    # A gateway's own headers (tenant, routing, `api-key`), sent on every request; values never printed or
    # saved.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_key_header: str = "Authorization"  # the key as `Authorization: Bearer KEY`, or raw under this name
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # merged into every request's JSON body
    ca_bundle: str | None = None  # https: trust this CA file (a staging gateway's own CA) …
    insecure: bool = False  # … or check no certificate at all (said once, loudly, at the start)
    stream: bool = True  # False: each answer asked for whole (`endpoint.stream: false`)

    @property
    def dialect(self) -> Dialect:
        return dialect(self.api)

    @property
    def streams(self) -> bool:
        """Its answers stream, a first token before the end (not embeddings, nor `stream: false`): the
        first-token timeout applies only then — a whole answer has the request timeout alone."""
        spoken = self.dialect
        return spoken.generates and (self.stream or spoken.whole is None)

    def reader(self, keep_text: bool) -> StreamReader:
        """A reader for one answer: the dialect's stream reader, or a whole answer's where it was asked for
        so."""
        spoken = self.dialect
        if self.stream or spoken.whole is None:
            return spoken.reader(keep_text)
        return WholeReader(spoken.whole)

    @property
    def url(self) -> str:
        return under(self.base_url, self.dialect.path)

    @property
    def request_headers(self) -> dict[str, str]:
        """What every request the harness makes to this endpoint carries besides its own framing: the
        dialect's own headers, the key (under the dialect's header unless the user named one) and the
        gateway's."""
        spoken = self.dialect
        key_header = spoken.key_header if self.api_key_header == "Authorization" else self.api_key_header
        return {**spoken.headers, **access_headers(self.api_key, key_header, self.headers)}

    def tls(self) -> ssl.SSLContext | None:
        """The TLS context every connection to an https endpoint uses; None for http."""
        return client_tls(self.ca_bundle, self.insecure) if self.base_url.startswith("https://") else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be printed or saved: the key and every header value."""
        return tuple(s for s in (self.api_key, *(value for _, value in self.headers)) if s)


def access_headers(api_key: str | None, api_key_header: str = "Authorization",
                   headers: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The key under its header (a bearer token under Authorization, raw under any other name) and the
    gateway's headers."""
    out: dict[str, str] = {}
    if api_key:
        out[api_key_header] = f"Bearer {api_key}" if api_key_header.lower() == "authorization" else api_key
    out.update(headers)
    return out


def take(reader: StreamReader, events: RequestEvents, body: bytes) -> bool:
    """A piece of the response body to `events`; True once the stream is over for the harness. One plain token
    alone in its read, the usual piece, goes the short way."""
    if reader.plain(body):
        return events.token()
    return events.chunks(reader.read(body))


def request_body(spec: RequestSpec, model: str, api: str, continuous_usage: bool = False,
                 extra: Mapping[str, Any] | None = None, stream: bool = True) -> dict[str, Any]:
    """The JSON body of one request in `api`'s dialect (`stream` False: its answer asked for whole); `extra`
    (the user's sampling and engine fields) last, over the harness's own optional fields (a user's
    `min_tokens` wins), never over what it measures by (checked where the scenario is read)."""
    body = dialect(api).body(spec, model, continuous_usage)
    if not stream and "stream" in body:
        body["stream"] = False
        body.pop("stream_options", None)
    for key, value in (extra or {}).items():
        mine = body.get(key)  # stream_options merged, so a user's own options keep the usage the harness reads
        body[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
    return body


def redirect(status: int, location: str) -> tuple[str, str] | None:
    """A 3xx answer as (reason, message): never followed — a POST turned into a GET elsewhere is not the
    request asked for, and its 404 would hide where the endpoint went."""
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
    return printable(f"HTTP {status} {err_type}", one_line=True)


def error_message(body: bytes) -> str:
    """The server's own sentence: `error.message` of an OpenAI-shaped error, else the body's text."""
    try:
        err = json.loads(body)["error"]
        message = err.get("message") if isinstance(err, dict) else err
        if isinstance(message, str):
            return printable(message, one_line=True)
    except (ValueError, KeyError, TypeError, RecursionError):
        pass
    return printable(body.decode("utf-8", "replace").strip(), one_line=True)
