"""The fault matrix: a purpose-built misbehaving server on loopback, one fault per request, run through the
real runner with both HTTP clients. Every fault must end as its status and cause, counted by cause in the
summary, with nothing saved as `ok` that was not, no traceback, and the API key (which this server echoes
back in every way it can) nowhere in what the harness writes."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.client.backend import Endpoint
from harness.config.scenario import Scenario, parse_scenario
from harness.records import STATUSES, RequestRecord
from harness.records_read import read_records
from harness.report.files import write_run
from harness.run.runner import run_scenario
from harness.stats.metrics import cause

SECRET = "sk-fault-matrix-0123456789abcdef"


def sse(*events: object) -> list[bytes]:
    return [b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events]


TOKEN = {"choices": [{"index": 0, "delta": {"content": " w"}}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 3}}
DONE = b"[DONE]"


def _usage(value: object) -> dict[str, object]:
    return {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": value}}


def _error(status: int, kind: str, message: str = "no") -> tuple[int, bytes]:
    return status, json.dumps({"error": {"message": message, "type": kind}}).encode()


# mode: (what the server does, expected status, expected cause)
MODES: dict[str, tuple[tuple[str, object], str, str]] = {
    "good": (("chunked", sse(TOKEN, TOKEN, TOKEN, USAGE, DONE)), "ok", ""),
    "500": (("json", _error(500, "server_error")), "http_error", "HTTP 500 server_error"),
    "429": (("json", _error(429, "rate_limit_error")), "http_error", "HTTP 429 rate_limit_error"),
    "500 until close": (("json-eof", _error(500, "server_error")), "http_error", "HTTP 500 server_error"),
    "stream until close, no [DONE]": (("eof", sse(TOKEN, TOKEN)), "bad_stream", "stream ended before [DONE]"),
    "stream until close": (("eof", sse(TOKEN, TOKEN, TOKEN, USAGE, DONE)), "ok", ""),
    "reset before answering": (("reset", None), "transport_error", "*"),
    "invalid JSON chunk": (("chunked", sse(TOKEN, b"{oops", DONE)), "bad_stream", "invalid JSON in stream chunk"),
    "choices not objects": (("chunked", sse({"choices": [1]}, DONE)), "bad_stream",
                            "stream chunk's choices are not objects"),
    "HTML instead of SSE": (("html", b"<html><body>gateway says hi</body></html>"), "bad_stream",
                            "stream ended before [DONE]"),
    "usage count is text": (("chunked", sse(TOKEN, TOKEN, TOKEN, _usage("lots"), DONE)), "bad_stream",
                            "usage.completion_tokens is not a count"),
    "usage count negative": (("chunked", sse(TOKEN, TOKEN, TOKEN, _usage(-7), DONE)), "bad_stream",
                             "usage.completion_tokens is not a count"),
    "truncated": (("chunked", sse(TOKEN, _usage(1), DONE)), "truncated", "fewer tokens than asked"),
    "key echoed in stream error": (("chunked", sse(TOKEN, {"error": {"message": f"bad key {SECRET}!"}})),
                                   "http_error", "error in stream"),
    "key echoed as error type": (("json", _error(401, SECRET)), "http_error", "HTTP 401"),
    "stall past the first-token timeout": (("stall", sse(TOKEN, USAGE, DONE)), "timeout", "first token timeout"),
    "a line that never ends": (("chunked", [b"data: " + b"x" * (9 << 20)]), "bad_stream",
                               "stream line longer than 8 MiB"),
    "headers that never end": (("endless-headers", None), "transport_error", "*"),
    "usage count past any context": (("chunked", sse(TOKEN, TOKEN, TOKEN, _usage(10**12), DONE)), "bad_stream",
                                     "usage.completion_tokens is not a count"),
    "500 nested 10,000 deep": (("json", (500, b'{"error": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")), "http_error",
                               "HTTP 500"),
    "a byte-order mark before the first event": (("chunked", [b"\xef\xbb\xbf", *sse(TOKEN, TOKEN, TOKEN, USAGE, DONE)]),
                                                 "ok", ""),
    "a gzip stream": (("gzip", sse(TOKEN, TOKEN, TOKEN, USAGE, DONE)), "ok", ""),
    # ~40 KiB on the wire, 40 MiB inflated, one line: read a step at a time, refused at the line cap.
    "a gzip bomb": (("gzip-raw", None), "bad_stream", "stream line longer than 8 MiB"),
    "a redirect to another port": (("redirect", b"http://127.0.0.1:9/v1/chat/completions"), "http_error",
                                   "HTTP 301 redirect"),
    "a stream sent as text/plain": (("plain", sse(TOKEN, TOKEN, TOKEN, USAGE, DONE)), "ok", ""),
    "ignores max_tokens": (("chunked", sse(*[TOKEN] * 8, _usage(8), DONE)), "overrun", "more tokens than max_tokens"),
    "a stream that never ends": (("endless", None), "overrun", "more tokens than max_tokens"),
    # Python's json gives a lone surrogate back as text no file can hold: the record is kept, the text replaced.
    "500 with a lone surrogate": (("json", (500, b'{"error": {"message": "bad \\ud800 char", '
                                                b'"type": "server_error"}}')), "http_error", "HTTP 500 server_error"),
}
ORDER = list(MODES)


def _bomb(mib: int = 40) -> bytes:
    """`data: xxx…` of `mib` MiB without a line end, gzipped a MiB at a time (never held inflated here)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [packer.compress(b"data: ")] + [packer.compress(b"x" * (1 << 20)) for _ in range(mib)]
    return b"".join([*parts, packer.flush()])


class _FaultServer(asyncio.Protocol):
    """One request per connection, answered by the next fault in ORDER (GET /v1/models answers normally)."""

    served: ClassVar[list[str]] = []
    plan: ClassVar[list[str]] = ORDER  # the faults, in the order requests get them
    answers: ClassVar[set[asyncio.Task[None]]] = set()

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        if len(body) < length:
            return
        self.buf = b""
        if head.startswith(b"GET"):
            self._send(200, b"application/json", b'{"object":"list","data":[{"id":"m"}]}', "length")
            return
        mode = self.plan[len(self.served) % len(self.plan)]
        self.served.append(mode)
        task = asyncio.ensure_future(self._answer(*MODES[mode][0]))
        self.answers.add(task)
        task.add_done_callback(self.answers.discard)

    async def _answer(self, kind: str, payload: object) -> None:
        assert self.transport is not None
        if kind == "reset":
            self.transport.abort()
        elif kind == "endless-headers":
            self.transport.write(b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * (200 << 10))
            await asyncio.sleep(2.0)
            self.transport.close()
        elif kind == "stall":
            await asyncio.sleep(4.0)  # well past the first-token timeout below, within the request timeout
            if not self.transport.is_closing():
                self._send(200, b"text/event-stream", b"".join(payload), "chunked")  # type: ignore[arg-type]
        elif kind in ("json", "json-eof"):
            status, body = payload  # type: ignore[misc]
            self._send(status, b"application/json", body, "eof" if kind == "json-eof" else "length")
        elif kind == "endless":  # tokens until the client hangs up (bounded: 100,000, well past any cap)
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n")
            event = sse(TOKEN)[0]
            for _ in range(100_000):
                if self.transport.is_closing():
                    return
                self.transport.write(b"%x\r\n%s\r\n" % (len(event), event))
                await asyncio.sleep(0)
            self.transport.close()
        elif kind in ("gzip", "gzip-raw"):  # compressed though never asked for: both clients decode it
            body = gzip.compress(b"".join(payload)) if kind == "gzip" else _bomb()  # type: ignore[arg-type]
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            self.transport.close()
        elif kind == "redirect":
            self.transport.write(b"HTTP/1.1 301 Moved\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                                 % payload)
            self.transport.close()
        elif kind == "plain":
            self._send(200, b"text/plain; charset=utf-8", b"".join(payload), "chunked")  # type: ignore[arg-type]
        elif kind == "html":
            self._send(200, b"text/html", payload, "length")  # type: ignore[arg-type]
        else:
            self._send(200, b"text/event-stream", b"".join(payload), kind)  # type: ignore[arg-type]

    def _send(self, status: int, ctype: bytes, body: bytes, framing: str) -> None:
        assert self.transport is not None
        head = b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nConnection: close\r\n" % (status, ctype)
        if framing == "length":
            out = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        elif framing == "chunked":
            out = head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        else:  # the body ends when the connection closes
            out = head + b"\r\n" + body
        self.transport.write(out)
        self.transport.close()


# The fault server answers every path from its plan, so the runs skip the default /tokenize probe (which would take
# the plan's first answer): the harness's own words, as against an endpoint without /tokenize.
WORDS = {"prompt_tokens": 8, "output_tokens": 3, "tokenizer": "words"}


@pytest.fixture
async def fault_url() -> AsyncIterator[str]:
    _FaultServer.served, _FaultServer.plan = [], ORDER
    server = await asyncio.get_running_loop().create_server(_FaultServer, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    server.close()


@pytest.mark.parametrize("http", ["h1", "aiohttp"])
async def test_every_fault_ends_as_its_status_and_cause(fault_url: str, http: str, tmp_path: Path) -> None:
    scenario = parse_scenario({
        "name": "faults", "workload": WORDS,
        "endpoint": {"scrape_interval_s": 0},
        # A timeout a busy core still leaves the gzip bomb's first 8 MiB to inflate in (at 0.3 s it did not)
        "client": {"http": http, "first_token_timeout_s": 1.5, "request_timeout_s": 5},
        "phases": [{"name": "p", "load": {"type": "concurrency", "concurrency": 1, "requests": len(ORDER)}}],
    }, "test")
    result = await run_scenario(scenario, Endpoint(fault_url, "m", "chat", SECRET), tmp_path / "run")
    write_run(result, lambda line: None)
    assert _FaultServer.served == ORDER
    records = sorted(read_records(tmp_path / "run" / "requests.jsonl"), key=lambda r: r.index)
    assert len(records) == len(ORDER)
    for rec, mode in zip(records, ORDER, strict=True):
        _, status, expected_cause = MODES[mode]
        assert rec.status == status, f"{mode}: {rec.status} {rec.reason}"
        if expected_cause != "*" and status != "ok":
            assert cause(rec) == expected_cause, f"{mode}: {rec.reason}"
    (phase,) = result.summary.phases
    failed_modes = [m for m in ORDER if MODES[m][1] != "ok"]
    assert phase.requests.ok == len(ORDER) - len(failed_modes)
    assert sum(phase.requests.failure_reasons.values()) == len(failed_modes)
    assert phase.requests.by_status["truncated"] == 1 and phase.requests.by_status["overrun"] == 2
    endless = next(r for r, m in zip(records, ORDER, strict=True) if m == "a stream that never ends")
    assert 4 * 3 + 16 < len(endless.chunk_ns) <= 64 and "the stream was cut" in endless.reason  # cut at the cap
    for path in (tmp_path / "run").iterdir():
        assert SECRET.encode() not in path.read_bytes(), path.name  # the key, echoed every way, is nowhere
    echoed = [r for r, m in zip(records, ORDER, strict=True) if "key echoed" in m]
    assert all("[REDACTED]" in r.reason + r.message for r in echoed)
    assert echoed[0].message == "bad key [REDACTED]!"  # the server's own words, kept without the key
    assert any("did not come as text/event-stream (text/html ×1, text/plain; charset=utf-8 ×1)" in w
               for w in phase.warnings), phase.warnings
    moved = next(r for r, m in zip(records, ORDER, strict=True) if "redirect" in m)
    assert "redirect to http://127.0.0.1:9/v1/chat/completions, not followed" in moved.message
    bom = next(r for r, m in zip(records, ORDER, strict=True) if "byte-order mark" in m)
    assert len(bom.chunk_ns) == 3  # the first token counted, not dropped with the mark
    surrogate = next(r for r, m in zip(records, ORDER, strict=True) if "surrogate" in m)
    assert surrogate.message == "bad ? char"
    assert result.summary.run.records_file is not None and result.summary.run.records_file.replaced == 1


class _ClosesIdle(asyncio.Protocol):
    """Advertises keep-alive, then drops any connection on which a second request arrives, without a byte
    of answer: the race of a server that closes idle connections just as the client reuses one. With
    `after_each`, it also closes every connection 0.2 ms after its response, as llama-server does."""

    def __init__(self, after_each: bool = False) -> None:
        self.after_each = after_each
        self.transport: asyncio.Transport | None = None
        self.answered = 0
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        if not sep or len(body) < length:
            return
        self.buf = b""
        if self.answered:
            self.transport.abort()
            return
        self.answered += 1
        stream = b"".join(sse(TOKEN, TOKEN, TOKEN, USAGE, DONE))
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\n"
                             b"Keep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + b"%x\r\n%s\r\n0\r\n\r\n" % (len(stream), stream))
        if self.after_each:
            asyncio.get_running_loop().call_later(0.0002, self.transport.close)


def _idle_scenario(http: str, think_ms: float = 0.0) -> Scenario:
    return parse_scenario({
        "name": "idle", "workload": WORDS,
        "endpoint": {"scrape_interval_s": 0}, "client": {"http": http},
        "phases": [{"name": "p", "load": {"type": "concurrency", "concurrency": 1, "requests": 6,
                                          "think_s": f"{think_ms}ms"}}],
    }, "test")


@pytest.mark.parametrize("http", ["h1", "aiohttp"])
async def test_a_dead_pooled_connection_is_retried_once_on_a_fresh_one(tmp_path: Path, http: str) -> None:
    server = await asyncio.get_running_loop().create_server(_ClosesIdle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    scenario = _idle_scenario(http)
    try:
        result = await run_scenario(scenario, Endpoint(url, "m"), tmp_path / "run")
    finally:
        server.close()
    (phase,) = result.summary.phases
    assert phase.requests.ok == 6, phase.requests.failure_reasons  # no spurious resets
    # Every request met a dead pooled connection, the first too: both clients' warm-up asks GET /v1/models on
    # each connection it pools (a connection the server has not answered is not pooled), so it is used once.
    assert sorted(r.retries for r in result.records) == [1] * 6
    assert phase.requests.retried == 6


@pytest.mark.parametrize("http", ["h1", "aiohttp"])
async def test_connections_closed_after_each_response_cost_no_request(tmp_path: Path, http: str) -> None:
    """llama-server's shape: keep-alive advertised, every connection closed just after its response. A
    connection seen closing while idle leaves the pool; one that dies as it is taken is retried."""
    server = await asyncio.get_running_loop().create_server(lambda: _ClosesIdle(after_each=True), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        result = await run_scenario(_idle_scenario(http, think_ms=50), Endpoint(url, "m"), tmp_path / "run")
    finally:
        server.close()
    (phase,) = result.summary.phases
    assert phase.requests.ok == 6, phase.requests.failure_reasons
    # With 50 ms between requests every close (0.2 ms after its response) was seen before the next send; with 5 ms
    # a loaded CI machine (the process off its core for longer) once took a dying connection and retried it.
    assert phase.requests.retried == 0



QUICK_FAULTS = [m for m in ORDER if m not in ("headers that never end", "stall past the first-token timeout")]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.sampled_from(QUICK_FAULTS), min_size=1, max_size=10), users=st.integers(1, 3),
       http=st.sampled_from(["h1", "aiohttp"]))
async def test_any_mix_of_faults_keeps_every_request_sent_and_every_line_whole(
        fault_url: str, tmp_path_factory: pytest.TempPathFactory, plan: list[str], users: int, http: str) -> None:
    """Whatever mix of misbehaviour a server serves, at any concurrency: the summary counts every request sent,
    every record line parses, and each status is one the harness knows."""
    _FaultServer.served, _FaultServer.plan = [], plan
    run_dir = tmp_path_factory.mktemp("mix") / "run"
    scenario = parse_scenario({
        "name": "mix", "workload": WORDS, "endpoint": {"scrape_interval_s": 0},
        "client": {"http": http, "first_token_timeout_s": 2, "request_timeout_s": 5},
        "phases": [{"name": "p", "load": {"type": "concurrency", "concurrency": users, "requests": len(plan) * 2}}],
    }, "test")
    result = await run_scenario(scenario, Endpoint(fault_url, "m", "chat", SECRET), run_dir)
    write_run(result, lambda line: None)
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == len(plan) * 2 and all(r["status"] in STATUSES for r in records)
    # A pooled connection reset before any answer is sent again once, on a fresh one: the server saw it twice.
    assert len(_FaultServer.served) == len(records) + sum(r["retries"] for r in records)
    (phase,) = result.summary.phases
    assert phase.requests.total == len(plan) * 2 == sum(phase.requests.by_status.values())


async def _bombed(client: dict[str, object], tmp_path: Path) -> RequestRecord:
    """One request to a server that answers with 10 MiB of blank lines gzipped to a few kB: the record."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    blank = b"".join([packer.compress(b"\n" * (1 << 20)) for _ in range(10)] + [packer.flush()])

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"POST"):
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(blank), blank))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    scenario = parse_scenario({"name": "bomb", "workload": WORDS, "endpoint": {"scrape_interval_s": 0},
                               "client": {"request_timeout_s": 30, **client},
                               "phases": [{"name": "p", "load": {"type": "batch", "size": 1}}]}, "test")
    try:
        result = await run_scenario(scenario, Endpoint(url, "m"), tmp_path / "run")
    finally:
        server.close()
    (rec,) = result.records
    return rec


async def test_a_gzip_bomb_is_read_a_step_at_a_time_and_capped(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """The lean client inflated a 0.5 MiB bomb to 510 MB in one piece: now no piece it reads is over a step, and
    past the cap (blank lines, which no line limit stops) the answer is refused."""
    import harness.client.h1_connection as h1

    sizes: list[int] = []
    real_take = h1.take

    def measured(reader: object, events: object, body: bytes) -> bool:
        sizes.append(len(body))
        return real_take(reader, events, body)  # type: ignore[arg-type]

    monkeypatch.setattr(h1, "take", measured)
    monkeypatch.setattr(h1, "INFLATED_BYTES", 8 << 20)  # the cap made small, so the test is quick
    rec = await _bombed({}, tmp_path)
    assert rec.status == "transport_error" and "inflates past 8 MiB" in rec.reason, rec.reason
    assert sizes and max(sizes) <= h1.INFLATE_STEP


async def test_a_gzip_bomb_through_aiohttp_is_capped_and_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 64: through aiohttp the bomb took 31 s and ended as 'first token timeout', the bomb not named."""
    import harness.client.aio as aio

    monkeypatch.setattr(aio, "INFLATED_BYTES", 8 << 20)
    started = time.monotonic()
    rec = await _bombed({"http": "aiohttp", "first_token_timeout_s": 20}, tmp_path)
    assert rec.status == "transport_error" and "gzip answer inflates past 8 MiB" in rec.reason, rec.reason
    assert time.monotonic() - started < 15  # not held to the first-token timeout
