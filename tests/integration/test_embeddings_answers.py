"""Embeddings answers through both HTTP clients from loopback servers that misbehave on purpose: a good answer is
timed end to end; a cut, foreign, endless, short or failed one ends as its status and cause. And the official
OpenAI SDK reads the simulator's."""

from __future__ import annotations

import asyncio
import json

import openai
from aiohttp import web

from tests.helpers import execute


def _answer(n: int) -> bytes:
    return json.dumps({"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.5, 0.5]}
                                                  for i in range(n)], "usage": {"prompt_tokens": 8}}).encode()


def sending(body: bytes, pause_s: float = 0.0, content_type: str = "application/json"):  # type: ignore[no-untyped-def]
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": content_type})
        await resp.prepare(request)
        for i in range(0, len(body), 32):  # in pieces, as a big answer comes
            await resp.write(body[i:i + 32])
            if pause_s:
                await asyncio.sleep(pause_s)
        return resp
    return handler


async def endless(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    await resp.write(b'{"object": "list", "data": [')
    for _ in range(80):  # 80 MiB on offer, past the 64 MiB cap; bounded all the same
        try:
            await resp.write(b"0," * (1 << 19))
        except (ConnectionResetError, RuntimeError):
            break
    return resp


async def test_a_good_answer_is_timed_end_to_end(server, kind: str) -> None:
    rec = await execute(await server(sending(_answer(1), pause_s=0.002)), api="embeddings", kind=kind)
    assert rec.status == "ok", rec.reason
    assert rec.first_token_ns is None and rec.chunk_ns == [] and rec.prompt_tokens == 8
    assert rec.sent_ns is not None and rec.last_token_ns is not None and rec.last_token_ns > rec.sent_ns
    assert rec.content_type is None  # JSON is what an embeddings answer is: not noted as a wrong media type


async def test_a_cut_foreign_endless_short_or_failed_answer_gets_its_cause(server, kind: str) -> None:
    chat = b'data: {"id":"chatcmpl-0123456789abcdef01","object":"chat.completion.chunk","choices":[]}\n\n'
    cases = {
        "cut": (sending(_answer(1)[:40]), "bad_stream", "invalid JSON in embeddings answer"),
        "foreign": (sending(chat + b"data: [DONE]\n\n", content_type="text/event-stream"), "bad_stream",
                    "foreign answer: a chat answer (object chat.completion.chunk) to a embeddings request"),
        "endless": (endless, "bad_stream", "answer longer than 64 MiB"),
        "short": (sending(_answer(0)), "bad_stream", "0 results for the 1 inputs sent"),
        "failed": (sending(b'{"error": {"message": "model is loading", "type": "server_error"}}'), "http_error",
                   "error in stream"),
    }
    for name, (handler, status, reason) in cases.items():
        rec = await execute(await server(handler), api="embeddings", kind=kind)
        assert (rec.status, reason in rec.reason) == (status, True), (name, rec.reason)


def test_the_openai_sdk_reads_the_simulators_embeddings(sim_url: str) -> None:
    client = openai.OpenAI(base_url=sim_url, api_key="unused", max_retries=0)
    made = client.embeddings.create(model="llama-3.1-8b", input=["one two three", "four five"], dimensions=32)
    assert [len(d.embedding) for d in made.data] == [32, 32] and made.usage.prompt_tokens == 5
    again = client.embeddings.create(model="llama-3.1-8b", input="one two three", dimensions=32)
    assert again.data[0].embedding == made.data[0].embedding  # the same text embeds the same
    assert abs(sum(x * x for x in made.data[1].embedding) - 1) < 1e-3


async def test_a_whole_answer_has_the_request_timeout_alone_not_the_first_token_ones(server, kind: str) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.5)  # past the first-token timeout below, well within the request's
        return web.Response(body=_answer(1), content_type="application/json")

    url = await server(slow)
    rec = await execute(url, api="embeddings", kind=kind, first_token_timeout_s=0.2, timeout_s=10)
    assert rec.status == "ok", rec.reason
    streamed = await execute(url, api="chat", kind=kind, first_token_timeout_s=0.2, timeout_s=10)
    assert (streamed.status, streamed.reason) == ("timeout", "first token timeout")
