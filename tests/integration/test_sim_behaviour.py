"""The simulator over HTTP: fixed timing, faults, back-pressure, start-up, preemption, SDK compatibility."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import numpy as np
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.client.aio import OpenAIBackend, open_session
from harness.client.backend import Endpoint
from harness.clock import MonotonicClock
from harness.config.simulator import FaultConfig, SimulatorConfig
from harness.config.workload import Workload
from harness.records import RequestRecord
from harness.run.worker import run_request
from harness.sim.build import perf_model
from harness.sim.listen import serve
from tests.helpers import build_requests

Start = Callable[..., Awaitable[str]]


@pytest.fixture
async def start_sim() -> AsyncIterator[Start]:
    runners = []

    async def start(**kw: object) -> str:
        runner, url = await serve(SimulatorConfig(noise_sigma=0.0, **kw), "127.0.0.1", 0)  # type: ignore[arg-type]
        runners.append(runner)
        return url

    yield start
    for runner in runners:
        await runner.cleanup()


async def harness_requests(url: str, n: int, prompt: int = 16, out: int = 8) -> list[RequestRecord]:
    specs = build_requests(Workload(prompt_tokens=prompt, output_tokens=out), "p", 0, n, seed=2, run_id="b")
    clock = MonotonicClock()
    async with open_session(n, 5, 30) as session:
        backend = OpenAIBackend(Endpoint(url, "llama-3.1-8b"), session)
        return list(await asyncio.gather(*(run_request(backend, clock, s, clock.now_ns(), _ignore) for s in specs)))


def _ignore(rec: RequestRecord) -> None:
    pass


async def truth(url: str, rid: str) -> dict:
    async with aiohttp.ClientSession() as s, s.get(url.removesuffix("/v1") + f"/sim/requests/{rid}") as resp:
        return await resp.json()


@pytest.mark.timing
async def test_fixed_timing_releases_tokens_on_an_exact_schedule(start_sim: Start) -> None:
    url = await start_sim(timing="fixed", fixed_ttft_ms=40, fixed_itl_ms=5)
    records = await harness_requests(url, 8, out=20)
    for rec in records:
        t = await truth(url, rec.request_id)
        offsets_ms = (np.array(t["token_ns"]) - t["arrival_ns"]) / 1e6
        expected = 40 + 5 * np.arange(20)
        assert np.all(offsets_ms >= expected)  # never early
        assert np.max(offsets_ms - expected) < 5  # and late only by timer/scheduling noise
        assert rec.status == "ok" and rec.completion_tokens == 20


@pytest.mark.parametrize(("faults", "status", "reason"), [
    ({"error_rate": 1.0, "error_status": 503}, "http_error", "HTTP 503 server_error"),
    ({"malformed_rate": 1.0}, "bad_stream", "invalid JSON"),
    ({"disconnect_rate": 1.0}, "transport_error", ""),
])
async def test_injected_faults_surface_as_statuses(start_sim: Start, faults: dict, status: str, reason: str) -> None:
    url = await start_sim(faults=FaultConfig(**faults))
    records = await harness_requests(url, 4)
    assert [r.status for r in records] == [status] * 4
    assert all(reason in r.reason for r in records)


async def test_stall_and_runtime_fault_changes(start_sim: Start) -> None:
    url = await start_sim()
    base = url.removesuffix("/v1")
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{base}/sim/faults", json={"stall_rate": 1.0, "stall_ms": 300}) as resp:
            assert resp.status == 200 and (await resp.json())["stall_ms"] == 300
        async with s.post(f"{base}/sim/faults", json={"stall_rate": 2}) as resp:
            assert resp.status == 400
    (rec,) = await harness_requests(url, 1, out=10)
    assert rec.status == "ok"
    assert max(np.diff([rec.sent_ns, *rec.chunk_ns])) >= 300e6  # the stream stood still for 300 ms
    async with aiohttp.ClientSession() as s, s.post(f"{base}/sim/faults", json={"stall_rate": 0}) as resp:
        assert resp.status == 200
    (rec,) = await harness_requests(url, 1, out=10)
    assert max(np.diff([rec.sent_ns, *rec.chunk_ns])) < 200e6


async def test_faults_are_seeded(start_sim: Start) -> None:
    async def pattern(seed: int) -> list[str]:
        url = await start_sim(faults=FaultConfig(error_rate=0.5, seed=seed))
        results = []
        for _ in range(12):  # one at a time: faults are drawn in arrival order
            (rec,) = await harness_requests(url, 1, out=2)
            results.append(rec.status)
        return results

    first = await pattern(1)
    assert first == await pattern(1)
    assert first != await pattern(2)
    assert 0 < first.count("http_error") < 12


async def test_queue_limit_answers_429_with_retry_after(start_sim: Start) -> None:
    url = await start_sim(max_num_seqs=1, max_waiting=2)
    body = {"model": "llama-3.1-8b", "prompt": "a b c", "max_tokens": 30, "ignore_eos": True}
    async with aiohttp.ClientSession() as s:
        async def post() -> tuple[int, str | None]:
            async with s.post(f"{url}/completions", json=body) as resp:
                await resp.read()
                return resp.status, resp.headers.get("Retry-After")

        tasks = []
        for _ in range(8):
            tasks.append(asyncio.create_task(post()))
            await asyncio.sleep(0.01)
        results = await asyncio.gather(*tasks)
    assert results.count((200, None)) >= 3  # one running, two waiting
    assert (429, "1") in results


async def test_startup_delay_answers_503_then_serves(start_sim: Start) -> None:
    url = await start_sim(startup_delay_s=0.4)
    async with aiohttp.ClientSession() as s:
        async with s.get(url.removesuffix("/v1") + "/health") as resp:
            assert resp.status == 503
        async with s.post(f"{url}/completions", json={"model": "llama-3.1-8b", "prompt": "x"}) as resp:
            assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        await asyncio.sleep(0.5)
        async with s.get(url.removesuffix("/v1") + "/health") as resp:
            assert resp.status == 200


def utilisation_for(kv_tokens: int, **cfg: object) -> float:
    """The gpu_memory_utilization that leaves about `kv_tokens` of KV cache, found through the memory model."""
    lo, hi = 0.05, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if perf_model(SimulatorConfig.model_validate({**cfg, "gpu_memory_utilization": mid}))[1] < kv_tokens:
            lo = mid
        else:
            hi = mid
    return hi


async def test_kv_exhaustion_queues_then_preempts(start_sim: Start) -> None:
    # About 1,000 tokens of KV: six requests of 150 + 100 tokens cannot all stay resident.
    url = await start_sim(gpu_memory_utilization=utilisation_for(1000, max_num_batched_tokens=512),
                          max_num_batched_tokens=512)
    records = await harness_requests(url, 6, prompt=150, out=100)
    assert all(r.status == "ok" and r.completion_tokens == 100 for r in records)
    async with aiohttp.ClientSession() as s, s.get(url.removesuffix("/v1") + "/metrics") as resp:
        text = await resp.text()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["vllm:num_preemptions_total"] > 0
    assert samples["vllm:request_queue_time_seconds_count"] == 6
    assert samples["sim:step_lateness_seconds_count"] > 0


async def test_prefix_caching_is_visible_in_metrics_and_ttft(start_sim: Start) -> None:
    url = await start_sim()
    shared = " ".join(f"w{i}" for i in range(2000))
    async with aiohttp.ClientSession() as s:
        async def ask(suffix: str) -> float:
            body = {"model": "llama-3.1-8b", "prompt": f"{shared} {suffix}", "max_tokens": 1}
            t0 = time.monotonic()
            async with s.post(f"{url}/completions", json=body) as resp:
                await resp.read()
            return time.monotonic() - t0

        cold = await ask("first question here")
        warm = await ask("second question here")
        async with s.get(url.removesuffix("/v1") + "/metrics") as resp:
            text = await resp.text()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["vllm:prefix_cache_hits_total"] >= 1984
    assert warm < cold


def test_openai_sdk_streams_chat_and_completions_with_usage(sim_url: str) -> None:
    client = openai.OpenAI(base_url=sim_url, api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model="llama-3.1-8b", messages=[{"role": "user", "content": "one two three"}], max_tokens=5, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 5
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert chunks[-1].usage.prompt_tokens == 3
    completion = client.completions.create(model="llama-3.1-8b", prompt="a b", max_tokens=4, stream=True,
                                           stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    parts = list(completion)
    assert len("".join(p.choices[0].text for p in parts if p.choices).split()) == 4
    assert parts[-1].usage is not None and parts[-1].usage.total_tokens == 6
    unary = client.chat.completions.create(model="llama-3.1-8b", messages=[{"role": "user", "content": "hi"}],
                                           max_completion_tokens=3, extra_body={"ignore_eos": True})
    assert unary.usage is not None and unary.usage.completion_tokens == 3
    assert unary.choices[0].finish_reason == "length"


async def test_simulator_sends_continuous_usage_when_asked(start_sim: Start) -> None:
    url = await start_sim()
    spec = build_requests(Workload(prompt_tokens=12, output_tokens=6), "p", 0, 1, seed=4, run_id="cu")[0]
    clock = MonotonicClock()
    async with open_session(1, 5, 30) as session:
        backend = OpenAIBackend(Endpoint(url, "llama-3.1-8b"), session, continuous_usage=True)
        rec = await run_request(backend, clock, spec, clock.now_ns(), _ignore)
    assert rec.status == "ok"
    assert rec.chunk_tokens == [1] * 6 and rec.completion_tokens == 6 and rec.prompt_tokens == 12
