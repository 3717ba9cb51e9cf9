"""What adding an API takes: a `Dialect` and its registry entry, nothing else. A toy API — its own path, its own
body, its own events — is registered here at run time, and both HTTP clients, the worker, the URLs and the
foreign-answer check take it as they take the built-in ones."""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from harness.client.backend import Endpoint, request_body
from harness.client.belongs import wrong_api
from harness.client.chunk import Chunk
from harness.client.dialects import DIALECTS
from harness.client.dialects.base import Body, Dialect, StreamReader
from harness.client.typed_events import EventReader, event_object
from harness.client.urls import split_request_url
from harness.workload.requests import RequestSpec
from tests.helpers import SEEN, execute, streaming


def _body(spec: RequestSpec, model: str, continuous_usage: bool) -> Body:
    return {"model": model, "say": spec.prompt, "at_most": spec.max_tokens}


def _interpret(name: bytes, payload: bytes) -> Chunk:
    kind, obj = event_object(name, payload)
    if kind == "piece":
        return Chunk(has_content=True)
    return Chunk(done=True, completion_tokens=obj.get("count")) if kind == "over" else Chunk()  # type: ignore[arg-type]


def _reader(keep_text: bool) -> StreamReader:
    return EventReader(_interpret, "over")


TOY = Dialect("toy", "toy/say", (b"toy.answer",), _body, _reader)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Dialect:
    monkeypatch.setitem(DIALECTS, "toy", TOY)
    return TOY


def _event(kind: str, **fields: object) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'object': 'toy.answer', **fields})}\n\n".encode()


async def _answer(request: web.Request) -> web.StreamResponse:
    request.app[SEEN].append(await request.json())
    return await streaming(request, [_event("hello"), *[_event("piece")] * 3, _event("over", count=3)])


async def test_a_registered_dialect_is_spoken_by_both_clients_end_to_end(toy: Dialect, kind: str) -> None:
    app = web.Application()
    app[SEEN] = []
    app.router.add_post("/v1/toy/say", _answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        rec = await execute(url, api="toy", kind=kind)
        ((body,),) = [app[SEEN]]
    finally:
        await runner.cleanup()
    assert rec.status == "ok", rec.reason
    assert len(rec.chunk_ns) == 3 and rec.completion_tokens == 3
    assert body["at_most"] == 3 and "say" in body


def test_the_urls_and_the_foreign_answer_check_read_the_registry(toy: Dialect) -> None:
    assert Endpoint("http://h/v1", "m", "toy").url == "http://h/v1/toy/say"
    assert split_request_url("http://h/v1/toy/say") == ("http://h/v1", "toy")
    assert wrong_api("chat", b'{"object":"toy.answer"}') == "a toy answer (object toy.answer) to a chat request"
    assert request_body(RequestSpec("r", "p", 0, "hi", 1, 2, False), "m", "toy") == {"model": "m", "say": "hi",
                                                                                     "at_most": 2}
