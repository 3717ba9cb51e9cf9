"""`client.read_window_us`: the lean client polls at most once a window, so the tokens of every stream come in
fewer, fuller reads, each stamp at most a window late; every token still counted."""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from harness.client.backend import Endpoint
from harness.client.h1 import H1Backend
from harness.clock import MonotonicClock
from harness.config.workload import Workload
from harness.records import RequestRecord
from harness.run.worker import run_request
from tests.helpers import build_requests, chunk, harness, served_on_a_thread, streaming

TOKENS, STREAMS, PAUSE_S, WINDOW_S = 40, 8, 0.002, 0.02
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":%d}}\n\n' % TOKENS


async def every_2ms(request: web.Request) -> web.StreamResponse:
    # One write per token, 2 ms apart: without a window a client that keeps up reads each on its own.
    return await streaming(request, [*(chunk(f" t{i}") for i in range(TOKENS)), USAGE, b"data: [DONE]\n\n"],
                           pause_s=PAUSE_S)


@pytest.fixture
def url() -> Iterator[str]:
    """The server on its own thread and loop: a nap of the client's loop must not hold the server's writes."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", every_2ms)
    with served_on_a_thread(app) as port:
        yield f"http://127.0.0.1:{port}/v1"


async def _run(url: str, window_s: float) -> tuple[list[RequestRecord], H1Backend]:
    clock = MonotonicClock()
    backend = H1Backend(Endpoint(url, "m", "chat", None), STREAMS, 5, 30, read_window_s=window_s)
    specs = build_requests(Workload(prompt_tokens=8, output_tokens=TOKENS), "p", 0, STREAMS, seed=0, run_id="w")
    try:
        records = await asyncio.gather(*(run_request(backend, clock, spec, clock.now_ns(), lambda r: None)
                                         for spec in specs))
    finally:
        await backend.close()
    return list(records), backend


async def test_a_window_gathers_tokens_into_fewer_reads_and_counts_every_one(url: str) -> None:
    records, backend = await _run(url, WINDOW_S)
    assert [r.status for r in records] == ["ok"] * STREAMS, [r.reason for r in records]
    assert all(len(r.chunk_ns) == TOKENS and r.completion_tokens == TOKENS for r in records)
    assert backend._window is not None and backend._window.naps > 0
    # The tokens of one read are stamped microseconds apart (one stamp per HTTP chunk the parser hands on): a
    # 20 ms window over 2 ms tokens leaves a few such bursts a stream, not one a token, and the bursts it leaves
    # are (nearly) a window apart, never closer on the whole.
    bursts = [_bursts(r.chunk_ns) for r in records]
    assert max(len(b) for b in bursts) <= TOKENS // 3, [len(b) for b in bursts]
    gaps_ms = [(b - a) / 1e6 for s in bursts for a, b in itertools.pairwise(s)]
    assert statistics.median(gaps_ms) >= 0.8 * WINDOW_S * 1e3, gaps_ms


def _bursts(stamps_ns: list[int]) -> list[int]:
    """The first stamp of each run of stamps under 1 ms apart: one read's tokens."""
    return [t for i, t in enumerate(stamps_ns) if i == 0 or t - stamps_ns[i - 1] > 1_000_000]


async def test_without_a_window_the_client_polls_as_usual(url: str) -> None:
    records, backend = await _run(url, 0.0)
    assert backend._window is None
    assert all(r.status == "ok" and len(r.chunk_ns) == TOKENS for r in records)


def test_a_run_with_a_window_says_so_in_its_summary_and_warnings(tmp_path: Path) -> None:
    scenario = tmp_path / "w.yaml"
    scenario.write_text("name: w\nworkload: {prompt_tokens: 16, output_tokens: 16}\nclient: {read_window_us: 500}\n"
                        "phases: [{name: p, load: {type: concurrency, concurrency: 4, requests: 8}}]\n")
    proc = harness("run", str(scenario), "--reports-dir", str(tmp_path / "r"), "--progress", "off")
    assert proc.returncode == 0, proc.stderr
    (summary_file,) = (tmp_path / "r").glob("*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["run"]["read_window_us"] == 500
    assert summary["phases"][0]["requests"]["ok"] == 8
    assert "client.read_window_us 500: the client slept 500 µs after each pass of reads" in proc.stderr
