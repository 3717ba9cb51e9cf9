"""Each typed-event API against loopback servers that misbehave on purpose, through both HTTP clients: a good
stream is timed and counted, and a truncated, foreign, never-ending, failed or garbled one ends as its status and
cause — as chat's do (tests/integration/test_client.py)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from tests.helpers import execute, streaming


def event(kind: str, **fields: object) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


LONG_ID = "0123456789abcdef0123"
# Per API: its opening, one answer token, one thinking token, its normal end after n tokens, a mid-stream failure.
SHAPES = {
    "responses": {
        "open": event("response.created", response={"id": f"resp_{LONG_ID}", "object": "response"}),
        "token": event("response.output_text.delta", item_id="m", output_index=0, content_index=0, delta=" w"),
        "think": event("response.reasoning_text.delta", item_id="r", output_index=0, content_index=0, delta=" h"),
        "end": lambda n: event("response.incomplete", response={
            "usage": {"input_tokens": 8, "output_tokens": n}, "incomplete_details": {"reason": "max_output_tokens"}}),
        "fail": event("response.failed", response={"error": {"code": "server_error", "message": "GPU fell over"}}),
        "last": "response.completed",
    },
    "messages": {
        "open": event("message_start", message={"id": f"msg_{LONG_ID}", "usage": {"input_tokens": 8}}),
        "token": event("content_block_delta", index=0, delta={"type": "text_delta", "text": " w"}),
        "think": event("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": " h"}),
        "end": lambda n: event("message_delta", delta={"stop_reason": "max_tokens"}, usage={"output_tokens": n})
        + event("message_stop"),
        "fail": event("error", error={"type": "overloaded_error", "message": "GPU fell over"}),
        "last": "message_stop",
    },
}
CHAT = b'data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","choices":[{"delta":{"content":"x"}}]}\n\n' \
    % LONG_ID.encode()


def answering(frames: list[bytes], pause_s: float = 0.0):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.StreamResponse:
        return await streaming(request, frames, pause_s)
    return handler


async def endless(shape: dict[str, object]):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(shape["open"])  # type: ignore[arg-type]
        for _ in range(10_000):  # far past any cap, bounded all the same
            try:
                await resp.write(shape["token"])  # type: ignore[arg-type]
            except (ConnectionResetError, RuntimeError):
                break
            await asyncio.sleep(0)
        return resp
    return handler


@pytest.fixture(params=sorted(SHAPES))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_good_stream_is_timed_and_counted(server, api: str, kind: str) -> None:
    s = SHAPES[api]
    frames = [s["open"], s["think"], s["token"], s["token"], s["end"](3)]  # type: ignore[operator]
    rec = await execute(await server(answering(frames, pause_s=0.01)), api=api, kind=kind)
    assert rec.status == "ok", rec.reason
    assert len(rec.chunk_ns) == 3 and rec.completion_tokens == 3 and rec.prompt_tokens == 8
    assert rec.first_token_ns is not None and rec.first_content_ns is not None
    assert rec.first_content_ns - rec.first_token_ns >= 5_000_000  # the answer began one pause after the thinking
    assert rec.finish_reason == "length"


async def test_a_stream_cut_before_its_last_event_is_bad(server, api: str, kind: str) -> None:
    s = SHAPES[api]
    rec = await execute(await server(answering([s["open"], s["token"], s["token"]])), api=api, kind=kind)
    assert (rec.status, rec.reason) == ("bad_stream", f"stream ended before {s['last']}")


async def test_another_apis_answer_is_foreign(server, api: str, kind: str) -> None:
    rec = await execute(await server(answering([CHAT, CHAT, CHAT, b"data: [DONE]\n\n"])), api=api, kind=kind)
    assert rec.status == "bad_stream" and "foreign answer: a chat answer" in rec.reason, rec.reason


async def test_a_stream_that_never_ends_is_cut(server, api: str, kind: str) -> None:
    rec = await execute(await server(await endless(SHAPES[api])), api=api, kind=kind)
    assert rec.status == "overrun" and "the stream was cut" in rec.reason


async def test_a_failure_mid_stream_keeps_the_servers_words(server, api: str, kind: str) -> None:
    s = SHAPES[api]
    rec = await execute(await server(answering([s["open"], s["token"], s["fail"]])), api=api, kind=kind)
    assert (rec.status, rec.reason, rec.message) == ("http_error", "error in stream", "GPU fell over")


async def test_a_garbled_event_is_a_bad_stream(server, api: str, kind: str) -> None:
    s = SHAPES[api]
    garbled = b"event: x\ndata: {not json\n\n"
    rec = await execute(await server(answering([s["open"], s["token"], garbled, s["end"](1)])),  # type: ignore[operator]
                        api=api, kind=kind)
    assert rec.status == "bad_stream" and "invalid JSON in stream event" in rec.reason
