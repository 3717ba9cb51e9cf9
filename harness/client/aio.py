"""The OpenAI streaming client: one aiohttp session, each API read by its dialect (`harness.client.dialects`).

Request failures are data: `execute` never raises for an HTTP error, a timeout, a broken
connection or a malformed stream; it reports them as events. aiohttp's exceptions are translated
here and nowhere else.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection

from harness.client.backend import (
    WARM_ANSWER_S,
    Endpoint,
    RequestEvents,
    error_message,
    error_reason,
    redirect,
    request_body,
    take,
)
from harness.client.belongs import Answered, Provenance
from harness.client.dialects.base import StreamReader
from harness.client.tls import tls_hint
from harness.client.urls import under
from harness.errors import BadChunk, EndpointError
from harness.limits import INFLATED_BYTES, MODELS_BODY_BYTES
from harness.redact import redactor
from harness.workload.requests import RequestSpec

_READ_BUFFER = 1 << 20  # large enough that a burst of chunks is one read, not many


async def _on_headers_sent(
    session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    stamp = ctx.trace_request_ctx
    if callable(stamp):
        stamp()


class _Try:
    """The trace context of one try: stamps `sent` when the headers go, and notes a pooled connection."""

    __slots__ = ("reused", "sent")

    def __init__(self, sent: Callable[[], None]) -> None:
        self.sent = sent
        self.reused = False

    def __call__(self) -> None:
        self.sent()


async def _on_reuse(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                    params: aiohttp.TraceConnectionReuseconnParams) -> None:
    if isinstance(ctx.trace_request_ctx, _Try):
        ctx.trace_request_ctx.reused = True


class _CarriedResponse(aiohttp.ClientResponse):
    """Keeps the connection that carried it: a response read whole at once has handed its connection back to
    the pool before the caller sees it, and one that is not the request's own must close that connection."""

    carrier: ResponseHandler | None = None

    async def start(self, connection: Connection) -> aiohttp.ClientResponse:
        self.carrier = connection.protocol
        return await super().start(connection)


def open_session(max_connections: int, connect_timeout_s: float, request_timeout_s: float,
                 tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """`tls`: the run's context for https (`client_tls`); None: the system's trust."""
    connector = aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections, ttl_dns_cache=None,
                                     ssl=tls if tls is not None else True)
    timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=connect_timeout_s)
    # `sent` is stamped when the request reaches its connection, after any connection set-up:
    # a TCP handshake is the client's cost (it shows as schedule lag), not the server's TTFT.
    tracing = aiohttp.TraceConfig()
    tracing.on_request_headers_sent.append(_on_headers_sent)
    tracing.on_connection_reuseconn.append(_on_reuse)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=_READ_BUFFER,
                                 trace_configs=[tracing], response_class=_CarriedResponse)


class OpenAIBackend:
    def __init__(self, endpoint: Endpoint, session: aiohttp.ClientSession, first_token_timeout_s: float | None = None,
                 continuous_usage: bool = False) -> None:
        self.endpoint = endpoint
        self.session = session
        self.first_token_timeout_s = first_token_timeout_s if endpoint.streams else None
        self.continuous_usage = continuous_usage
        self._headers = {"Content-Type": "application/json", **endpoint.request_headers}
        self._prepared: dict[str, tuple[bytes, dict[str, str]]] = {}
        self._provenance = Provenance(endpoint.api)
        self._answered: weakref.WeakKeyDictionary[ResponseHandler, tuple[int, Answered]] = \
            weakref.WeakKeyDictionary()
        self._serials = itertools.count()

    async def warm(self, count: int) -> int:
        return await warm_connections(self.session, self.endpoint.base_url, count, self.endpoint.request_headers)

    async def close(self) -> None:
        await self.session.close()

    def prepare(self, spec: RequestSpec) -> None:
        # Serialising before the deadline keeps JSON encoding out of the schedule lag.
        body = request_body(spec, self.endpoint.model, self.endpoint.api, self.continuous_usage,
                            self.endpoint.extra_body, self.endpoint.stream)
        self._prepared[spec.request_id] = (json.dumps(body).encode(),
                                           {**self._headers, "X-Request-Id": spec.request_id})

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        if spec.request_id not in self._prepared:
            self.prepare(spec)
        body, headers = self._prepared.pop(spec.request_id)
        for attempt in range(2):
            try:
                await self._attempt(spec.request_id, body, headers, events)
                return
            except _NeverAnswered as exc:
                # Closed before any answer (a pooled connection the server had just dropped): it never saw the
                # request, so it goes once more, as the lean client does.
                if attempt or events.got_token:
                    events.failed("transport_error", type(exc.__cause__).__name__)
                    return
                events.retried()

    async def _attempt(self, request_id: str, body: bytes, headers: dict[str, str], events: RequestEvents) -> None:
        """One try; raises `_NeverAnswered` only when the connection died before the server answered at
        all."""
        answered, attempt = False, _Try(events.sent)
        try:
            # Until the first token, the tighter first-token timeout applies; then only the total.
            async with asyncio.timeout(self.first_token_timeout_s) as first_token_deadline:
                async with self.session.post(self.endpoint.url, data=body, headers=headers, allow_redirects=False,
                                             trace_request_ctx=attempt) as resp:
                    answered = True
                    events.status(resp.status)
                    if resp.status != 200:
                        events.failed("http_error", *await _error_reason(resp))
                    else:
                        await self._read_own(request_id, resp, events, first_token_deadline)
        except TimeoutError:
            events.failed("timeout", "request timeout" if events.got_token else "first token timeout")
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if answered or not attempt.reused:  # only a pooled connection can have died unseen
                events.failed("transport_error", type(exc).__name__)
            else:
                raise _NeverAnswered from exc
        except aiohttp.ClientResponseError as exc:  # e.g. a Content-Encoding it cannot decode (br): say which
            events.failed("transport_error", f"{type(exc).__name__}: {exc.message}"[:120])
        except aiohttp.ClientError as exc:
            events.failed("transport_error", type(exc).__name__)
        except BadChunk as exc:
            events.failed("bad_stream", str(exc))
        except Inflated as exc:
            events.failed("transport_error", str(exc))

    async def _read_own(self, request_id: str, resp: aiohttp.ClientResponse, events: RequestEvents,
                        first_token_deadline: asyncio.Timeout) -> None:
        """The stream, if it is this request's answer (`belongs`); one that is not closes its connection."""
        carrier = resp.carrier if isinstance(resp, _CarriedResponse) else None
        known = self._answered.get(carrier) if carrier is not None else None
        serial, last = known if known is not None else (next(self._serials), None)
        echoed = resp.headers.get("X-Request-Id")
        reader = self.endpoint.reader(events.keep_text)
        if reader.streams and resp.content_type != "text/event-stream":
            events.media(resp.headers.get("Content-Type") or "(none)")
        try:
            if (why := self._provenance.stale_echo(request_id, last, echoed)) is not None:
                raise BadChunk(why)
            await _read_stream(resp, reader, events, first_token_deadline, lambda first: self._provenance.foreign(
                request_id, last, first, echoed))
        except (BadChunk, Inflated):
            if carrier is not None:
                carrier.close()  # never reused: what else it carries is not any request's
            raise
        if carrier is not None:
            self._answered[carrier] = serial, self._provenance.answered(serial, request_id, reader.first)


class _NeverAnswered(Exception):
    """The connection died before a byte of answer: the server cannot have taken the request."""


class Inflated(Exception):
    """A compressed answer that inflates past INFLATED_BYTES: a bomb, not a stream of tokens (aiohttp inflated a
    0.5 MiB one for 31 s until the first-token timeout, the bomb not named)."""


async def _read_stream(resp: aiohttp.ClientResponse, reader: StreamReader, events: RequestEvents,
                       first_token_deadline: asyncio.Timeout, foreign: Callable[[bytes], str | None]) -> None:
    """`foreign`: why an answer whose first payload is this is not the request's (raised), or None."""
    checked = False
    inflated, limit = 0, INFLATED_BYTES if resp.headers.get("Content-Encoding") else None

    def whose(bad: BadChunk | None = None) -> None:
        """Once the first payload is in, raise if it is not this request's answer: another API's that failed
        to parse as this one's (`bad`) is named as foreign, not as garbled."""
        nonlocal checked
        if not checked and reader.first is not None:
            checked = True
            if (why := foreign(reader.first)) is not None:
                raise BadChunk(why) from None
        if bad is not None:
            raise bad

    async for piece in resp.content.iter_any():
        inflated += len(piece)
        if limit is not None and inflated > limit:
            raise Inflated(f"the {resp.headers['Content-Encoding']} answer inflates past {limit >> 20} MiB: not a "
                           "stream of tokens")
        try:
            over = take(reader, events, piece)
        except BadChunk as bad:
            whose(bad)
        whose()
        if events.got_token:
            first_token_deadline.reschedule(None)
        if over:
            return
    try:
        whole = reader.finish()  # an answer that comes whole is read at its end
    except BadChunk as bad:
        whose(bad)
    whose()
    events.chunks(whole)
    events.ended(reader.end)


async def _error_reason(resp: aiohttp.ClientResponse) -> tuple[str, str]:
    """The short cause and the server's own message."""
    moved = redirect(resp.status, resp.headers.get("Location", ""))
    if moved is not None:
        return moved
    try:
        body = await asyncio.wait_for(resp.content.read(8192), 5)
    except (TimeoutError, aiohttp.ClientError):
        body = b""
    return error_reason(resp.status, body), error_message(body)


# Where a model list says a model's context, by server: vLLM and SGLang, OpenRouter, LM Studio.
CONTEXT_FIELDS = ("max_model_len", "context_length", "max_context_length")


async def list_models(session: aiohttp.ClientSession, base_url: str, headers: Mapping[str, str] | None = None,
                      secrets: Sequence[str] = (), contexts: dict[str, int] | None = None) -> list[str]:
    """The endpoint's served models; also proves it is reachable before any load is sent. `headers`: the key's
    and the gateway's (`Endpoint.request_headers`); `secrets`, blanked out of what is said
    (`Endpoint.secrets`); `contexts` takes each model's context length where the list gives one
    (`CONTEXT_FIELDS`)."""
    url = under(base_url, "models")
    redact = redactor(*secrets)  # a 401 may echo the key back
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                raise EndpointError(redact(f"GET {url} answered {(await _error_reason(resp))[0]}"))
            body = json.loads(await _capped(resp, url))
    except (aiohttp.ClientError, TimeoutError) as exc:
        said = f"{type(exc).__name__} {exc}".strip()
        raise EndpointError(redact(f"cannot reach endpoint {base_url}: {said}{tls_hint(base_url, said)}")) from None
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise EndpointError(f"GET {url} did not return JSON (or JSON nested too deep to read)") from None
    try:
        ids = [str(m["id"]) for m in body["data"]]
    except (KeyError, TypeError):
        raise EndpointError(f"GET {url} did not return an OpenAI model list") from None
    if contexts is not None:
        contexts.update((str(m["id"]), n) for m in body["data"] if (n := _context(m)) is not None)
    return [i for i in ids if _text(i)]


async def get_json(session: aiohttp.ClientSession, url: str, headers: Mapping[str, str] | None = None) -> object:
    """A JSON body the endpoint may or may not serve (llama-server's `/props`, SGLang's `/get_server_info`),
    capped like the model list; None where it answers anything but 200 and JSON, or does not answer."""
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                return None
            return json.loads(await _capped(resp, url))
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError, EndpointError):
        return None


def _context(card: object) -> int | None:
    """A model card's context length in tokens, if it gives a sane one."""
    if not isinstance(card, dict):
        return None
    found = next((card[f] for f in CONTEXT_FIELDS if f in card), None)
    return found if isinstance(found, int) and not isinstance(found, bool) and 0 < found <= 1 << 40 else None


async def _capped(resp: aiohttp.ClientResponse, url: str) -> bytes:
    """The body, up to `MODELS_BODY_BYTES`: a 200 MB model list was read whole (732 MB of memory)."""
    raw = bytearray()
    while len(raw) <= MODELS_BODY_BYTES and (piece := await resp.content.read(MODELS_BODY_BYTES + 1 - len(raw))):
        raw += piece
    if len(raw) > MODELS_BODY_BYTES:
        raise EndpointError(f"GET {url} answered over {MODELS_BODY_BYTES >> 20} MiB: not a model list")
    return bytes(raw)


def _text(model_id: str) -> bool:
    """A model id a request can carry: text (a lone surrogate the JSON escaped cannot be sent or saved)."""
    try:
        model_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def warm_connections(session: aiohttp.ClientSession, base_url: str, count: int,
                           headers: Mapping[str, str]) -> int:
    """Open up to `count` pooled connections before a phase's clock starts; returns how many answered.

    Connection set-up is the client's cost, not the server's latency: without this, the first
    batch of a fixed-batch phase pays a TCP handshake per request inside its schedule lag. A GET unanswered
    within `WARM_ANSWER_S` is abandoned with its connection (see `H1Backend.warm`).
    """
    url = under(base_url, "models")

    async def one() -> bool:
        try:
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=WARM_ANSWER_S)) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    results = await asyncio.gather(*(one() for _ in range(count)))
    return sum(results)
