"""The simulator's HTTP surface, served in-process on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.sim.listen import serve
from harness.tokens import make_text
from harness.tools.predict import predict


@pytest.fixture
async def sim() -> AsyncIterator[str]:
    runner, url = await serve(SimulatorConfig(noise_sigma=0.0, max_model_len=4096), "127.0.0.1", 0)
    yield url
    await runner.cleanup()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


def chat(n_prompt: int = 10, **extra: object) -> dict[str, object]:
    return {"model": "llama-3.1-8b", "messages": [{"role": "user", "content": make_text(n_prompt, 1)}], **extra}


async def test_bytes_that_come_in_as_a_step_falls_due_wait_for_its_end(session: aiohttp.ClientSession) -> None:
    """Parsing them then would make the step late (issue 67); they are taken as soon as it has ended."""
    running, url = await serve(SimulatorConfig(noise_sigma=0.0), "127.0.0.1", 0)
    try:
        gate = running.server.driver.gate  # the driver is idle: nothing else moves its gate
        gate.due(time.monotonic_ns())
        answered = asyncio.ensure_future(session.get(f"{url}/models"))
        await asyncio.sleep(0.3)
        assert not answered.done()
        gate.ended()
        async with await asyncio.wait_for(answered, 10) as resp:
            assert resp.status == 200
    finally:
        await running.cleanup()


async def test_models_and_health(sim: str, session: aiohttp.ClientSession) -> None:
    async with session.get(f"{sim}/models") as resp:
        assert [m["id"] for m in (await resp.json())["data"]] == ["llama-3.1-8b"]
    async with session.get(sim.removesuffix("/v1") + "/health") as resp:
        assert resp.status == 200


@pytest.mark.parametrize(("body", "status", "code"), [
    ({**chat(), "model": "gpt-9"}, 404, "model_not_found"),
    ({"model": "llama-3.1-8b"}, 400, None),
    (chat(max_tokens="many"), 400, None),
    (chat(4100, max_tokens=200), 400, "context_length_exceeded"),  # the prompt alone fills the context
    (chat(max_tokens=0), 400, None),  # vLLM refuses a request that can produce nothing
    (chat(max_tokens=4, min_tokens=8), 400, None),  # … or cannot meet its own minimum
])
async def test_openai_shaped_errors(sim: str, session: aiohttp.ClientSession, body: dict, status: int,
                                    code: str | None) -> None:
    async with session.post(f"{sim}/chat/completions", json=body) as resp:
        assert resp.status == status
        err = (await resp.json())["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
        assert err["code"] == code


async def test_api_key_is_enforced_when_configured(session: aiohttp.ClientSession) -> None:
    runner, url = await serve(SimulatorConfig(), "127.0.0.1", 0, api_key="sk-1")
    try:
        async with session.post(f"{url}/chat/completions", json=chat(max_tokens=2)) as resp:
            assert resp.status == 401
        async with session.post(f"{url}/chat/completions", json=chat(max_tokens=2),
                                headers={"Authorization": "Bearer sk-1"}) as resp:
            assert resp.status == 200
        # The model list and the fault switch are behind the key too.
        async with session.get(f"{url}/models") as resp:
            assert resp.status == 401
        async with session.get(f"{url}/models", headers={"Authorization": "Bearer sk-1"}) as resp:
            assert resp.status == 200
        faults = url.removesuffix("/v1") + "/sim/faults"
        async with session.post(faults, json={"error_rate": 1.0}) as resp:
            assert resp.status == 401
        async with session.post(faults, json={"error_rate": 0.0}, headers={"Authorization": "Bearer sk-1"}) as resp:
            assert resp.status == 200
    finally:
        await runner.cleanup()


async def test_non_streaming_chat_has_exact_usage(sim: str, session: aiohttp.ClientSession) -> None:
    body = chat(37, max_tokens=50, max_completion_tokens=7, ignore_eos=True, unknown_field={"x": 1})
    async with session.post(f"{sim}/chat/completions", json=body, headers={"X-Request-Id": "u1"}) as resp:
        data = await resp.json()
        assert resp.headers["X-Request-Id"] == "u1"
    # No prompt_tokens_details: vLLM sends them only with --enable-prompt-tokens-details.
    assert data["usage"] == {"prompt_tokens": 37, "completion_tokens": 7, "total_tokens": 44}
    assert len(data["choices"][0]["message"]["content"].split()) == 7  # max_completion_tokens wins
    async with session.get(sim.removesuffix("/v1") + "/sim/requests/u1") as resp:
        truth = await resp.json()
    assert len(truth["token_ns"]) == 7 and truth["arrival_ns"] < truth["token_ns"][0]


async def test_length_without_ignore_eos_is_deterministic_and_clamped(sim: str, session: aiohttp.ClientSession) -> None:
    async def length(max_tokens: int, min_tokens: int = 0) -> int:
        body = chat(20, max_tokens=max_tokens, min_tokens=min_tokens)
        async with session.post(f"{sim}/chat/completions", json=body) as resp:
            return int((await resp.json())["usage"]["completion_tokens"])

    free, again, short = await asyncio.gather(length(2000), length(2000), length(3))
    assert free == again and short == min(3, free)
    assert await length(2000, min_tokens=free + 5) == free + 5


async def test_metrics_parse_and_count_tokens(sim: str, session: aiohttp.ClientSession) -> None:
    for _ in range(2):
        async with session.post(f"{sim}/completions", json={"model": "llama-3.1-8b", "prompt": "a b c",
                                                             "max_tokens": 5, "ignore_eos": True}) as resp:
            assert resp.status == 200
    async with session.get(sim.removesuffix("/v1") + "/metrics") as resp:
        text = await resp.text()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["vllm:generation_tokens_total"] == 10
    assert samples["vllm:prompt_tokens_total"] == 6
    assert samples["vllm:time_to_first_token_seconds_count"] == 2
    assert samples["vllm:inter_token_latency_seconds_count"] == 8
    assert samples["vllm:num_requests_running"] == 0
    # Where the stress lands: 2 prefills of 3 tokens and 8 decodes, all memory-bound on an H100.
    assert samples["sim:peak_hbm_bytes_per_second"] == 3.35e12 and samples["sim:peak_flops_per_second"] == 989e12
    assert samples["sim:memory_bound_seconds_total"] > 0 and samples["sim:compute_bound_seconds_total"] == 0
    assert samples["sim:hbm_read_bytes_total"] > 10 * 15e9  # the weights, read once a step
    assert 0.4 < samples["sim:step_mbu"] < 0.75 and 0 < samples["sim:step_mfu"] < 0.01
    vllm = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name.startswith("vllm:")]
    assert vllm and all(s.labels.get("engine") == "0" and s.labels["model_name"] == "llama-3.1-8b" for s in vllm)


async def metric(sim: str, session: aiohttp.ClientSession, name: str) -> float:
    async with session.get(sim.removesuffix("/v1") + "/metrics") as resp:
        text = await resp.text()
    return next((s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name), 0.0)


async def test_client_disconnect_frees_the_slot(sim: str, session: aiohttp.ClientSession) -> None:
    body = chat(10, max_tokens=2000, ignore_eos=True, stream=True)
    async with session.post(f"{sim}/chat/completions", json=body) as resp:
        await resp.content.readline()
        async with session.get(sim.removesuffix("/v1") + "/sim/status") as st:
            assert (await st.json())["running"] == 1
        resp.close()
    for _ in range(100):
        async with session.get(sim.removesuffix("/v1") + "/sim/status") as st:
            if (await st.json())["running"] == 0:
                break
        await asyncio.sleep(0.02)
    else:
        pytest.fail("the simulator kept running a request whose client had gone")
    # As vLLM 0.33: its first token and gaps were observed as they came (every iteration); an aborted request's
    # end-to-end and queue times are not.
    assert await metric(sim, session, "vllm:time_to_first_token_seconds_count") == 1
    assert await metric(sim, session, "vllm:e2e_request_latency_seconds_count") == 0
    assert await metric(sim, session, "vllm:request_queue_time_seconds_count") == 0


async def test_max_tokens_past_the_context_is_refused_as_vllm_does(sim: str, session: aiohttp.ClientSession) -> None:
    """vLLM 0.33 answers 400 when max_tokens is past the context the prompt leaves; without max_tokens the
    answer's default cap is shortened to that room."""
    body = {**chat(4000, max_tokens=200), "stream": False, "ignore_eos": True}
    async with session.post(f"{sim}/chat/completions", json=body) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["message"].startswith("'max_tokens' or 'max_completion_tokens' is too large: 200.")
    assert "(200 > 4096 - 4000)" in error["message"] and error["type"] == "invalid_request_error"
    body = {**chat(4000, max_tokens=200), "stream": False}
    del body["max_tokens"]
    async with session.post(f"{sim}/chat/completions", json=body) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert answer["usage"]["completion_tokens"] <= 96  # 4,096 − 4,000


def test_predict_refuses_as_the_server_does() -> None:
    """The same rule in virtual time: a max_tokens past the room the prompt leaves is a 400, as is a prompt that
    leaves none; one that fits is answered."""
    scenario = parse_scenario({
        "name": "ctx", "simulator": {"max_model_len": 4096},
        "workload": {"prompt_tokens": 3800, "output_tokens": 200},
        "phases": [{"name": "fits", "load": {"type": "constant", "rate": 1, "requests": 2}}],
    }, "test")
    over = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"prompt_tokens": 4000})})
    full = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"prompt_tokens": 4100})})
    fits, past, refused = (predict(s).to_json()["phases"][0]["requests"] for s in (scenario, over, full))
    assert fits["by_status"]["ok"] == 2
    assert past["by_status"]["http_error"] == 2 and refused["by_status"]["http_error"] == 2


@pytest.mark.parametrize("faults", [{}, {"stall_rate": 1.0, "stall_ms": 1.0}])  # the direct path, the faulty one
async def test_the_role_chunk_comes_with_the_first_token(session: aiohttp.ClientSession, faults: dict) -> None:
    """As vLLM sends it: a client timing the first event must not see a TTFT of 0."""
    cfg = SimulatorConfig.model_validate({"timing": "fixed", "fixed_ttft_ms": 300, "faults": faults})
    runner, url = await serve(cfg, "127.0.0.1", 0)
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        async with session.post(f"{url}/chat/completions", json=chat(max_tokens=3, stream=True)) as resp:
            first = await resp.content.readuntil(b"\n\n")
            first_s = loop.time() - start
            rest = await resp.read()
        assert b'"role":"assistant"' in first.replace(b" ", b"")
        assert first_s >= 0.29  # the server releases nothing before its TTFT
        assert rest.count(b"data: ") == 3 + 1  # three tokens (the finish_reason on the last), [DONE]
    finally:
        await runner.cleanup()


async def test_a_stream_ends_as_vllms_do(sim: str, session: aiohttp.ClientSession) -> None:
    """finish_reason on the last token's chunk (no empty chunk after it), then usage, then [DONE]; and while a
    request still streams, its first token is already in the TTFT histogram (observed every iteration)."""
    body = {**chat(10, max_tokens=5, ignore_eos=True, stream=True), "stream_options": {"include_usage": True}}
    before = await metric(sim, session, "vllm:time_to_first_token_seconds_count")
    async with session.post(f"{sim}/chat/completions", json=body) as resp:
        events = [line[6:] for line in (await resp.text()).splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    content = [c for c in chunks[:-1] if c["choices"][0]["delta"].get("content")]
    assert len(content) == 5 and len(chunks) == 1 + 5 + 1  # the role, five tokens, usage: nothing else
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 4 + ["length"]
    assert await metric(sim, session, "vllm:time_to_first_token_seconds_count") == before + 1
    async with session.get(sim.removesuffix("/v1") + "/metrics") as resp:
        families = {f.name: f for f in text_string_to_metric_families(await resp.text())}
    success = {s.labels["finished_reason"]: s.value for s in families["vllm:request_success"].samples
               if s.name == "vllm:request_success_total"}
    assert success.get("length", 0) >= 1
    for name in ("request_prompt_tokens", "request_generation_tokens", "request_prefill_time_seconds",
                 "request_decode_time_seconds", "request_inference_time_seconds"):
        assert await metric(sim, session, f"vllm:{name}_count") >= 1, name


async def test_without_max_tokens_vllms_defaults_apply(sim: str, session: aiohttp.ClientSession) -> None:
    """vLLM 0.33: 16 tokens on /v1/completions; on chat, as far as the context allows."""
    async with session.post(f"{sim}/completions", json={"model": "llama-3.1-8b", "prompt": "hello there",
                                                         "ignore_eos": True}) as resp:
        done = await resp.json()
    assert done["usage"]["completion_tokens"] == 16 and done["choices"][0]["finish_reason"] == "length"
    async with session.post(f"{sim}/chat/completions", json={**chat(4000, ignore_eos=True), "stream": False}) as resp:
        done = await resp.json()
    usage = done["usage"]
    assert usage["completion_tokens"] == 4096 - usage["prompt_tokens"] > 16  # to the end of the 4,096 context
    assert done["choices"][0]["finish_reason"] == "length"


async def test_prompt_tokens_details_only_when_enabled(session: aiohttp.ClientSession) -> None:
    runner, url = await serve(SimulatorConfig(noise_sigma=0.0, enable_prompt_tokens_details=True), "127.0.0.1", 0)
    try:
        async with session.post(f"{url}/chat/completions", json=chat(37, max_tokens=3, ignore_eos=True)) as resp:
            data = await resp.json()
    finally:
        await runner.cleanup()
    assert data["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
