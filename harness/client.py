"""The OpenAI streaming client: one aiohttp session, one SSE parser, for chat and completions.

Request failures are data: `execute` never raises for an HTTP error, a timeout, a broken
connection or a malformed stream; it fills the record's status and reason instead. aiohttp's
exceptions are translated here and nowhere else.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal, Protocol

import aiohttp

from harness.clock import Clock
from harness.errors import HarnessError
from harness.records import RequestRecord
from harness.sse import BadChunk
from harness.stream import StreamAccumulator
from harness.workload import RequestSpec

Api = Literal["chat", "completions"]

_READ_BUFFER = 1 << 20  # large enough that a burst of chunks is one read, not many


class Backend(Protocol):
    def prepare(self, spec: RequestSpec) -> None:
        """Do the work of building the request ahead of its deadline (optional)."""

    async def execute(self, spec: RequestSpec, rec: RequestRecord) -> None:
        """Send `spec`, filling `rec` (sent, token times, usage, status). Never raises for request failures."""


class PooledBackend(Backend, Protocol):
    """A backend that owns its connections: the runner opens them before a phase and closes them at the end."""

    async def warm(self, count: int) -> int: ...

    async def close(self) -> None: ...


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


async def _on_headers_sent(
    session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    stamp = ctx.trace_request_ctx
    if callable(stamp):
        stamp()


def open_session(max_connections: int, connect_timeout_s: float, request_timeout_s: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections, ttl_dns_cache=None)
    timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=connect_timeout_s)
    # `sent` is stamped when the request reaches its connection, after any connection set-up:
    # a TCP handshake is the client's cost (it shows as schedule lag), not the server's TTFT.
    tracing = aiohttp.TraceConfig()
    tracing.on_request_headers_sent.append(_on_headers_sent)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=_READ_BUFFER,
                                 trace_configs=[tracing])


class OpenAIBackend:
    def __init__(self, endpoint: Endpoint, session: aiohttp.ClientSession, clock: Clock,
                 first_token_timeout_s: float | None = None, continuous_usage: bool = False) -> None:
        self.endpoint = endpoint
        self.session = session
        self.clock = clock
        self.first_token_timeout_s = first_token_timeout_s
        self.continuous_usage = continuous_usage
        self._headers = {"Content-Type": "application/json"}
        if endpoint.api_key:
            self._headers["Authorization"] = f"Bearer {endpoint.api_key}"
        self._prepared: dict[str, tuple[bytes, dict[str, str]]] = {}

    async def warm(self, count: int) -> int:
        return await warm_connections(self.session, self.endpoint.base_url, count, self.endpoint.api_key)

    async def close(self) -> None:
        await self.session.close()

    def prepare(self, spec: RequestSpec) -> None:
        # Serialising before the deadline keeps JSON encoding out of the schedule lag.
        body = request_body(spec, self.endpoint.model, self.endpoint.api, self.continuous_usage)
        self._prepared[spec.request_id] = (json.dumps(body).encode(),
                                           {**self._headers, "X-Request-Id": spec.request_id})

    async def execute(self, spec: RequestSpec, rec: RequestRecord) -> None:
        if spec.request_id not in self._prepared:
            self.prepare(spec)
        body, headers = self._prepared.pop(spec.request_id)
        now = self.clock.now_ns

        def stamp_sent() -> None:
            rec.sent_ns = now()

        try:
            # Until the first token, the tighter first-token timeout applies; then only the total.
            async with asyncio.timeout(self.first_token_timeout_s) as first_token_deadline:
                async with self.session.post(self.endpoint.url, data=body, headers=headers,
                                             trace_request_ctx=stamp_sent) as resp:
                    rec.http_status = resp.status
                    if resp.status != 200:
                        rec.status, rec.reason = "http_error", await _error_reason(resp)
                    else:
                        await self._read_stream(resp, rec, first_token_deadline)
        except TimeoutError:
            rec.status = "timeout"
            rec.reason = "first token timeout" if rec.first_token_ns is None else "request timeout"
        except aiohttp.ClientError as exc:
            rec.status, rec.reason = "transport_error", type(exc).__name__
        except BadChunk as exc:
            rec.status, rec.reason = "bad_stream", str(exc)
        finally:
            rec.end_ns = self.clock.now_ns()
            if rec.chunk_ns:
                rec.last_token_ns = rec.chunk_ns[-1]

    async def _read_stream(self, resp: aiohttp.ClientResponse, rec: RequestRecord,
                           first_token_deadline: asyncio.Timeout) -> None:
        stream = StreamAccumulator(rec, lambda: first_token_deadline.reschedule(None))
        now = self.clock.now_ns
        async for piece in resp.content.iter_any():
            if stream.feed(now(), piece):  # every event in one read arrived together
                return
        stream.ended()


def error_reason(status: int, body: bytes) -> str:
    """A short, low-cardinality cause: the status and the OpenAI error type when there is one."""
    try:
        err_type = json.loads(body)["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}"
    return f"HTTP {status} {err_type}"


async def _error_reason(resp: aiohttp.ClientResponse) -> str:
    try:
        body = await asyncio.wait_for(resp.content.read(8192), 5)
    except (TimeoutError, aiohttp.ClientError):
        body = b""
    return error_reason(resp.status, body)


async def list_models(session: aiohttp.ClientSession, base_url: str, api_key: str | None) -> list[str]:
    """The endpoint's served models; also proves it is reachable before any load is sent."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                raise HarnessError(f"GET {url} answered {await _error_reason(resp)}")
            body = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise HarnessError(f"cannot reach endpoint {base_url}: {type(exc).__name__} {exc}".strip()) from None
    except ValueError:
        raise HarnessError(f"GET {url} did not return JSON") from None
    try:
        return [str(m["id"]) for m in body["data"]]
    except (KeyError, TypeError):
        raise HarnessError(f"GET {url} did not return an OpenAI model list") from None


async def warm_connections(session: aiohttp.ClientSession, base_url: str, count: int, api_key: str | None) -> int:
    """Open up to `count` pooled connections before a phase's clock starts; returns how many answered.

    Connection set-up is the client's cost, not the server's latency: without this, the first
    batch of a fixed-batch phase pays a TCP handshake per request inside its schedule lag.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"

    async def one() -> bool:
        try:
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=10)) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    results = await asyncio.gather(*(one() for _ in range(count)))
    return sum(results)
