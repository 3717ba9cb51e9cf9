"""Fixtures shared by the integration tests: small loopback servers that misbehave on purpose."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from harness.client.dialects import DIALECTS
from tests.helpers import SEEN

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]})


@pytest.fixture
async def server() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler, listing: Handler = models) -> str:
        """`handler` answers every API's requests; `listing`, GET /v1/models."""
        app = web.Application()
        app[SEEN] = []
        for spoken in DIALECTS.values():
            app.router.add_post(f"/v1/{spoken.path}", handler)
        app.router.add_get("/v1/models", listing)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}/v1"

    start.runners = runners  # type: ignore[attr-defined]
    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture(params=["aiohttp", "h1"])
def kind(request: pytest.FixtureRequest) -> str:
    """Every client test runs against both HTTP clients: they must agree on every status."""
    return str(request.param)
