"""The streaming client against real loopback servers that misbehave on purpose."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from harness.client.aio import list_models, open_session
from harness.client.backend import Endpoint, request_body
from harness.client.h1 import H1Backend
from harness.clock import MonotonicClock
from harness.config.workload import Workload
from harness.errors import HarnessError
from harness.records import RequestRecord
from harness.run.worker import run_request
from tests.helpers import SEEN, USAGE, build_requests, chunk, execute, streaming

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]




async def good(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    peer = request.transport.get_extra_info("peername")[1] if request.transport else None
    request.app[SEEN].append((request.headers.copy(), body, peer))
    return await streaming(request, [chunk(""), chunk(" a"), chunk(" b"), chunk(" c"), USAGE, b"data: [DONE]\n\n"],
                           pause_s=0.01)


async def reasoning_first(request: web.Request) -> web.StreamResponse:
    think = b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}\n\n'
    # Three token-bearing chunks: the request asks for exactly three tokens (ignore_eos).
    return await streaming(request, [think, chunk(" answer"), chunk(" here"), b"data: [DONE]\n\n"], pause_s=0.02)


async def overloaded(request: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "queue full", "type": "rate_limit_error"}}, status=429)


async def malformed(request: web.Request) -> web.StreamResponse:
    return await streaming(request, [chunk(" a"), b"data: {oops\n\n", b"data: [DONE]\n\n"])


async def truncated(request: web.Request) -> web.StreamResponse:
    return await streaming(request, [chunk(" a"), chunk(" b")])  # ends without [DONE]


async def disconnect(request: web.Request) -> web.StreamResponse:
    resp = await streaming(request, [chunk(" a")])
    assert request.transport is not None
    request.transport.close()  # hang up mid-stream
    return resp


async def stall(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(1)
    return await streaming(request, [chunk(" a"), b"data: [DONE]\n\n"])


def _ignore(rec: RequestRecord) -> None:
    pass


SPEC = build_requests(Workload(prompt_tokens=8, output_tokens=3), "p", 0, 1, seed=0, run_id="t")[0]


async def test_good_stream_is_timed_and_counted(server, kind: str) -> None:
    url = await server(good)
    rec = await execute(url, key="sk-secret", kind=kind)
    assert rec.status == "ok", rec.reason
    assert len(rec.chunk_ns) == 3  # the role-only first chunk is not a token
    assert rec.completion_tokens == 3 and rec.prompt_tokens == 8 and not rec.token_mismatch
    assert rec.sent_ns is not None and rec.intended_ns <= rec.sent_ns < rec.first_token_ns  # type: ignore[operator]
    assert rec.first_token_ns == rec.chunk_ns[0] and rec.last_token_ns == rec.chunk_ns[-1]
    assert rec.chunk_ns[-1] - rec.chunk_ns[0] >= 15_000_000  # the server paused 10 ms between chunks


async def test_request_carries_id_key_and_ignore_eos(server, kind: str) -> None:
    url = await server(good)
    await execute(url, key="sk-secret", kind=kind)
    ((headers, body, _),) = server.runners[0].app[SEEN]
    assert headers["X-Request-Id"] == SPEC.request_id
    assert headers["Authorization"] == "Bearer sk-secret"
    assert body["model"] == "m" and body["ignore_eos"] is True and body["max_tokens"] == 3


async def test_reasoning_counts_for_ttft_and_first_content_is_kept_apart(server, kind: str) -> None:
    rec = await execute(await server(reasoning_first), kind=kind)
    assert rec.status == "ok"
    # The thinking chunk is the first token, the answer's first chunk the first content: told apart by which chunk
    # each is, not by the 20 ms between them (a loaded machine stamping the first one late shortened that gap to
    # 13 ms once).
    assert len(rec.chunk_ns) == 3 and rec.first_token_ns == rec.chunk_ns[0]
    assert rec.first_content_ns == rec.chunk_ns[1] > rec.first_token_ns
    assert rec.tokens_estimated  # no usage chunk: counted from chunks


@pytest.mark.parametrize(("handler", "status", "reason"), [
    (overloaded, "http_error", "HTTP 429 rate_limit_error"),
    (malformed, "bad_stream", "invalid JSON"),
    (truncated, "bad_stream", "stream ended before [DONE]"),
    (disconnect, "transport_error", ""),
])
async def test_failures_become_statuses(server, handler: Handler, status: str, reason: str, kind: str) -> None:
    rec = await execute(await server(handler), kind=kind)
    assert rec.status == status
    assert reason in rec.reason
    assert rec.end_ns >= rec.intended_ns


async def test_timeout_is_a_status(server, kind: str) -> None:
    rec = await execute(await server(stall), timeout_s=0.3, kind=kind)
    assert rec.status == "timeout"


async def test_refused_connection_is_a_transport_error(unused_tcp_port: int, kind: str) -> None:
    rec = await execute(f"http://127.0.0.1:{unused_tcp_port}/v1", kind=kind)
    assert rec.status == "transport_error" and rec.sent_ns is None


async def test_list_models_and_unreachable_endpoint(server, unused_tcp_port: int) -> None:
    url = await server(good)
    async with open_session(1, 5, 5) as session:
        assert await list_models(session, url, None) == ["m1", "m2"]
        with pytest.raises(HarnessError, match="cannot reach endpoint"):
            await list_models(session, f"http://127.0.0.1:{unused_tcp_port}/v1", None)


async def test_a_model_list_past_8_mib_is_refused_not_read_whole(server) -> None:
    """A 200 MB /v1/models was read whole (732 MB of memory): reading stops past the cap."""
    from aiohttp import web

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"object": "list", "data": [{"id": "')
        for _ in range(64):  # 64 MiB on offer; the client should stop after ~8
            try:
                await resp.write(b"m" * (1 << 20))
            except (ConnectionResetError, RuntimeError):
                return resp
        await resp.write(b'"}]}')
        return resp

    url = await server(good, huge)
    async with open_session(1, 5, 30) as session:
        with pytest.raises(HarnessError, match="answered over 8 MiB: not a model list"):
            await list_models(session, url)


def test_request_body_shapes() -> None:
    chat = request_body(SPEC, "m", "chat")
    assert chat["messages"] == [{"role": "user", "content": SPEC.prompt}]
    assert chat["max_tokens"] == 3 and chat["ignore_eos"] is True and chat["min_tokens"] == 3
    comp = request_body(SPEC, "m", "completions")
    assert comp["prompt"] == SPEC.prompt and "messages" not in comp


async def multi_token_with_usage(request: web.Request) -> web.StreamResponse:
    def frame(text: str, done_tokens: int) -> bytes:
        obj = {"choices": [{"index": 0, "delta": {"content": text}}],
               "usage": {"prompt_tokens": 8, "completion_tokens": done_tokens}}
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    return await streaming(request, [frame(" a", 1), frame(" b c d", 4), frame(" e", 5),
                                     b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":5}}\n\n',
                                     b"data: [DONE]\n\n"], pause_s=0.02)


async def test_continuous_usage_gives_tokens_per_chunk(server, kind: str) -> None:
    from harness.stats.metrics import itl_samples_ns

    five = build_requests(Workload(prompt_tokens=8, output_tokens=5), "p", 0, 1, seed=0, run_id="t")[0]
    rec = await execute(await server(multi_token_with_usage), five, kind=kind)
    assert rec.status == "ok"
    assert rec.chunk_tokens == [1, 3, 1] and rec.completion_tokens == 5
    over = await execute(await server(multi_token_with_usage), kind=kind)  # 5 tokens for the 3 asked
    assert over.status == "overrun" and over.reason == "5 of 3 tokens: the server ignored max_tokens"
    samples = itl_samples_ns(rec)
    gap1, gap2 = rec.chunk_ns[1] - rec.chunk_ns[0], rec.chunk_ns[2] - rec.chunk_ns[1]
    assert samples == pytest.approx([gap1 / 3] * 3 + [gap2])


async def test_first_token_timeout_is_its_own_reason(server, kind: str) -> None:
    rec = await execute(await server(stall), kind=kind, first_token_timeout_s=0.2)
    assert (rec.status, rec.reason) == ("timeout", "first token timeout")
    assert 0.15e9 < rec.end_ns - rec.intended_ns < 0.9e9


def test_continuous_usage_is_requested_only_when_asked() -> None:
    assert "continuous_usage_stats" not in request_body(SPEC, "m", "chat")["stream_options"]
    assert request_body(SPEC, "m", "chat", continuous_usage=True)["stream_options"]["continuous_usage_stats"]


async def test_h1_keeps_connections_alive_across_requests(server) -> None:
    url = await server(good)
    clock = MonotonicClock()
    backend = H1Backend(Endpoint(url, "m"), 4, 5, 10)
    assert await backend.warm(2) == 2
    specs = build_requests(Workload(prompt_tokens=8, output_tokens=3), "p", 0, 8, seed=0, run_id="ka")
    for spec in specs:
        rec = await run_request(backend, clock, spec, clock.now_ns(), _ignore)
        assert rec.status == "ok", rec.reason
        await asyncio.sleep(0.01)  # let the body's last chunk return the connection to the pool
    await backend.close()
    peers = {peer for _, _, peer in server.runners[0].app[SEEN]}
    assert len(peers) <= 2  # eight requests over the two warmed connections


async def test_h1_says_how_long_a_new_connection_took_and_warms_only_what_is_missing(server) -> None:
    """A request that found no pooled connection carries its connect time; one on a warmed connection none.
    Warming again tops the pool up rather than opening as many again."""
    url = await server(good)
    clock = MonotonicClock()
    backend = H1Backend(Endpoint(url, "m"), 4, 5, 10)
    cold = await run_request(backend, clock, SPEC, clock.now_ns(), _ignore)
    assert cold.status == "ok" and cold.connect_ms is not None and 0 < cold.connect_ms < 5_000
    assert cold.sent_ns is not None and cold.sent_ns - cold.intended_ns >= cold.connect_ms * 1e6 - 1  # inside TTFT
    for _ in range(200):  # the body's last chunk returns the connection to the pool
        if backend._idle:
            break
        await asyncio.sleep(0.01)
    assert await backend.warm(3) == 3  # the one already pooled, and two more
    assert len(backend._idle) == 3
    warm = await run_request(backend, clock, SPEC, clock.now_ns(), _ignore)
    assert warm.status == "ok" and warm.connect_ms is None
    await backend.close()
    assert len(server.runners[0].app[SEEN]) == 2  # the warm-ups sent no request


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"data": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "did not return JSON"),  # nested past any parser
    (b'{"object": "list", "data": [{"id": "bad\\ud800"}, {"id": "m"}]}', ["m"]),  # an id no request can carry
])
async def test_a_hostile_model_list_is_an_endpoint_error_or_skipped_never_a_crash(body: bytes,
                                                                                 expected: object) -> None:
    async def models(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        async with open_session(1, 5, 10) as session:
            if isinstance(expected, list):
                assert await list_models(session, url, None) == expected
            else:
                with pytest.raises(HarnessError, match=str(expected)):
                    await list_models(session, url, None)
    finally:
        await runner.cleanup()
