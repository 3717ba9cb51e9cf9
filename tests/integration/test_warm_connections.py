"""Connections opened ahead of a phase against a server with a fixed pool of HTTP threads (llama-server's
cpp-httplib, tests/pinned_threads.py): a connection the server accepted but never served must not carry a
request, which would wait a keep-alive timeout before the server read it (issue 34: the first requests of a
run waited 5.0 s at llama-server with 8 slots and 12 threads, after 24 connections were opened ahead)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.run.runner import run_scenario
from tests.pinned_threads import PinnedThreads


@pytest.mark.parametrize("client", ["h1", "aiohttp"])
async def test_requests_never_ride_a_connection_the_server_has_not_served(tmp_path: Path, client: str) -> None:
    server = PinnedThreads(threads=4, keep_alive_s=3.0)
    sc = parse_scenario({
        "name": "pinned", "workload": {"prompt_tokens": 8, "output_tokens": 4},
        "endpoint": {"api": "chat", "scrape_interval_s": 0},
        "client": {"http": client},
        # 12 requests: 12 connections opened ahead (an open loop's pool covers every request it sends), three
        # times the server's threads; at 10/s each is done long before the next arrives.
        "phases": [{"name": "p", "load": {"type": "constant", "rate": 10, "requests": 12}}],
    }, "test")
    async with server.serving() as url:
        result = await run_scenario(sc, Endpoint(url, "m", "chat", None), tmp_path / client)
    (phase,) = result.summary.phases
    assert phase.requests.ok == 12
    ttft_max = phase.latency_ms.ttft.max
    # Served at once, each TTFT is milliseconds; on a connection the server had not served it is the 3 s
    # keep-alive of a pinned idle one. The bound is half of that, for a busy machine.
    assert ttft_max is not None and ttft_max < 1500, f"a request waited {ttft_max:.0f} ms for a server thread"
