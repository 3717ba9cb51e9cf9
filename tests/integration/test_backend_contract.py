"""The backend contract: every backend reports the same events for the same server behaviour, so the
worker fills the same record whichever one ran. The HTTP clients meet real loopback servers; the fake
meets the same behaviours as scripts, on the virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from harness.client.aio import OpenAIBackend, open_session
from harness.client.backend import Backend, Endpoint
from harness.client.fake import Script, ScriptedBackend
from harness.client.h1 import H1Backend
from harness.clock import Clock, FakeClock, MonotonicClock
from harness.config.workload import Workload
from harness.records import RequestRecord
from harness.run.worker import run_request
from tests.helpers import USAGE, build_requests, chunk, streaming

SPEC = build_requests(Workload(prompt_tokens=8, output_tokens=3), "p", 0, 1, seed=0, run_id="c")[0]
ERROR_IN_STREAM = b'data: {"error": {"message": "engine died", "type": "server_error"}}\n\n'


FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'


async def good(request: web.Request) -> web.StreamResponse:
    return await streaming(request, [chunk(" a"), chunk(" b"), chunk(" c"), FINISH, USAGE, b"data: [DONE]\n\n"],
                           0.005)


async def overloaded(request: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "queue full", "type": "rate_limit_error"}}, status=429)


async def cut_short(request: web.Request) -> web.StreamResponse:
    return await streaming(request, [chunk(" a"), chunk(" b")])


async def engine_died(request: web.Request) -> web.StreamResponse:
    return await streaming(request, [chunk(" a"), ERROR_IN_STREAM])


async def hang_up(request: web.Request) -> web.StreamResponse:
    resp = await streaming(request, [chunk(" a")])
    assert request.transport is not None
    request.transport.close()
    return resp


# (server behaviour, the same as a script for the fake, expected status, reason, server message, tokens seen)
Case = tuple[Callable[[web.Request], Awaitable[web.StreamResponse]], Script, str, str | None, str, int]
CASES: dict[str, Case] = {
    "good": (good, Script(tokens=3), "ok", "", "", 3),
    "overloaded": (overloaded, Script(http_status=429, error_type="rate_limit_error", error_message="queue full"),
                   "http_error", "HTTP 429 rate_limit_error", "queue full", 0),
    "cut short": (cut_short, Script(tokens=2, usage=False, no_done=True, finish_reason=None), "bad_stream",
                  "stream ended before [DONE]", "", 2),
    "error in stream": (engine_died, Script(tokens=1, stream_error="engine died", finish_reason=None), "http_error",
                        "error in stream", "engine died", 1),
    "hang up": (hang_up, Script(tokens=3, cut_after=1), "transport_error", None, "", 1),
}


def _keep(rec: RequestRecord) -> None:
    pass


async def _run(backend: Backend, clock: Clock) -> RequestRecord:
    if isinstance(clock, FakeClock):
        task = asyncio.ensure_future(run_request(backend, clock, SPEC, clock.now_ns(), _keep))
        await clock.run_until_idle(task)
        return task.result()
    return await run_request(backend, clock, SPEC, clock.now_ns(), _keep)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", ["h1", "aiohttp", "fake"])
async def test_every_backend_reports_the_same_record(server, kind: str, case: str) -> None:
    handler, script, status, reason, message, tokens = CASES[case]
    if kind == "fake":
        clock: Clock = FakeClock()
        fake = ScriptedBackend(clock, ttft_ms=20, itl_ms=5, scripts={SPEC.index: script})  # type: ignore[arg-type]
        rec = await _run(fake, clock)
    else:
        clock = MonotonicClock()
        endpoint = Endpoint(await server(handler), "m")
        if kind == "h1":
            h1 = H1Backend(endpoint, 2, 5, 10)
            rec = await _run(h1, clock)
            await h1.close()
        else:
            async with open_session(2, 5, 10) as session:
                rec = await _run(OpenAIBackend(endpoint, session), clock)
    assert rec.status == status, rec.reason
    if reason is not None:
        assert rec.reason == reason
    assert rec.message == message
    assert rec.finish_reason == ("length" if status == "ok" else None)
    assert len(rec.chunk_ns) == tokens
    assert rec.sent_ns is not None and rec.intended_ns <= rec.sent_ns <= rec.end_ns
    if tokens:
        assert rec.first_token_ns == rec.chunk_ns[0] and rec.last_token_ns == rec.chunk_ns[-1]
        assert rec.sent_ns < rec.chunk_ns[0] <= rec.chunk_ns[-1] <= rec.end_ns
    if status == "ok":
        assert rec.completion_tokens == 3 and rec.prompt_tokens == 8 and not rec.token_mismatch
    if case == "overloaded":
        assert rec.http_status == 429
