"""Reading an endpoint's /metrics: the parser on real expositions, the phase summary on hand-made rows,
and the scraper against real HTTP servers on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from harness.clock import NS_PER_S, MonotonicClock
from harness.run.scrape import ServerScraper
from harness.stats.server import (
    FILENAME,
    Row,
    metrics_url,
    parse_exposition,
    phase_server_summary,
    rates,
    read_server_metrics,
    same_origin,
)


def vllm_exposition(running: tuple[float, float], generated: float) -> str:
    """What prometheus-client itself writes for vLLM's names, with two engines behind one endpoint."""
    r = CollectorRegistry()
    run = Gauge("vllm:num_requests_running", "", ["model_name", "engine"], registry=r)
    kv = Gauge("vllm:kv_cache_usage_perc", "", ["model_name", "engine"], registry=r)
    gen = Counter("vllm:generation_tokens", "", ["model_name", "engine"], registry=r)
    ttft = Histogram("vllm:time_to_first_token_seconds", "", ["model_name"], registry=r)
    for engine, value, usage in (("0", running[0], 0.2), ("1", running[1], 0.6)):
        run.labels("m", engine).set(value)
        kv.labels("m", engine).set(usage)
        gen.labels("m", engine).inc(generated / 2)
    ttft.labels("m").observe(0.1)
    return generate_latest(r).decode()


def test_vllm_series_are_summed_over_engines_and_the_cache_share_averaged() -> None:
    values = parse_exposition(vllm_exposition((3, 5), 1000))
    assert values == {"running": 8, "kv_cache_usage": pytest.approx(0.4), "generation_tokens_total": 1000}


def test_sglang_and_tgi_names_are_read_too() -> None:
    text = ('# HELP sglang:num_queue_reqs q\n# TYPE sglang:num_queue_reqs gauge\n'
            'sglang:num_queue_reqs{model_name="x"} 7.0\nsglang:token_usage{model_name="x"} 0.5\n'
            'tgi_batch_current_size 12\nunrelated_metric{a="b c"} 99\n')
    assert parse_exposition(text) == {"waiting": 7, "kv_cache_usage": 0.5, "running": 12}


LLAMA_CPP = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 2903.63
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 3469
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 8
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
"""


def test_llama_cpp_names_are_read_too() -> None:
    """llama-server --metrics, as it exposes them (names and types from its /metrics page)."""
    assert parse_exposition(LLAMA_CPP) == {"prompt_tokens_total": 6886, "generation_tokens_total": 3469,
                                           "running": 8, "waiting": 3}


def test_metrics_url_sits_at_the_root_beside_the_api() -> None:
    assert metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("https://host/openai/v1/") == "https://host/metrics"
    assert same_origin("http://127.0.0.1:8000/metrics", "http://127.0.0.1:8000/v1")
    assert not same_origin("http://127.0.0.1:9090/metrics", "http://127.0.0.1:8000/v1")
    assert not same_origin("http://host/metrics", "https://host/v1")


def test_phase_summary_averages_gauges_and_turns_counters_into_rates() -> None:
    rows = [Row(t * NS_PER_S, {"running": float(t), "waiting": 2.0 * t, "generation_tokens_total": 100.0 * t ** 2})
            for t in range(6)]
    s = phase_server_summary(rows, 1 * NS_PER_S, 4 * NS_PER_S)  # scrapes at 1, 2, 3, 4 s
    assert s["scrapes"] == 4
    assert s["running_mean"] == 2.5 and s["running_max"] == 4 and s["waiting_max"] == 8
    assert s["generation_tokens_per_s"] == pytest.approx((1600 - 100) / 3)
    assert s["kv_cache_usage_max"] is None and s["prompt_tokens_per_s"] is None  # not exported
    times, per_s = rates(rows, "generation_tokens_total")
    assert times[0] == 0.5 * NS_PER_S and per_s == [100, 300, 500, 700, 900]


def test_a_counter_is_read_between_scrapes_over_the_phase_window() -> None:
    rows = [Row(0, {"generation_tokens_total": 0.0, "running": 1.0}),
            Row(2 * NS_PER_S, {"generation_tokens_total": 200.0, "running": 3.0})]
    s = phase_server_summary(rows, NS_PER_S // 2, 3 * NS_PER_S // 2)  # no scrape inside the window
    assert s["generation_tokens_per_s"] == pytest.approx(100)
    assert s["scrapes"] == 0 and s["running_mean"] is None  # gauges only from scrapes inside


def test_one_scrape_gives_no_rate() -> None:
    s = phase_server_summary([Row(0, {"generation_tokens_total": 5.0})], 0, NS_PER_S)
    assert s["scrapes"] == 1 and s["generation_tokens_per_s"] is None


Handler = Callable[[web.Request], web.Response]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], asyncio.Future[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_get("/metrics", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/metrics"

    yield start  # type: ignore[misc]
    for runner in runners:
        await runner.cleanup()


async def scrape_for(url: str, tmp_path: Path, seconds: float, key: str | None = None) -> tuple[ServerScraper, dict]:
    scraper = ServerScraper(url, MonotonicClock(), 0.05, tmp_path, {"Authorization": f"Bearer {key}"} if key else None)
    scraper.start()
    await asyncio.sleep(seconds)
    return scraper, (await scraper.stop()).to_json()


async def test_scraper_writes_every_reading_to_disk_as_it_goes(serve, tmp_path: Path) -> None:
    count = 0

    async def metrics(_: web.Request) -> web.Response:
        nonlocal count
        count += 1
        return web.Response(text=vllm_exposition((count, 0), 10 * count))

    scraper, info = await scrape_for(await serve(metrics), tmp_path, 0.5)
    # About 10 scheduled scrapes plus the last one at stop; bounds generous for a loaded machine.
    assert 5 <= info["scrapes"] <= 13 and info["unavailable"] is None and info["failures"] == {}
    assert info["series"] == ["generation_tokens_total", "kv_cache_usage", "running"]
    assert read_server_metrics(tmp_path) == scraper.rows
    assert [r.values["running"] for r in scraper.rows] == list(range(1, count + 1))


async def test_an_endpoint_without_metrics_is_noted_once_and_left_alone(serve, tmp_path: Path) -> None:
    calls = 0

    async def missing(_: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.Response(status=404)

    _, info = await scrape_for(await serve(missing), tmp_path, 0.3)
    assert calls == 1 and info["unavailable"] == "HTTP 404" and info["scrapes"] == 0
    assert not (tmp_path / FILENAME).exists() and read_server_metrics(tmp_path) == []


async def test_failed_scrapes_are_counted_by_cause_and_scraping_goes_on(serve, tmp_path: Path) -> None:
    calls = 0

    async def flaky(_: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        if calls % 2 == 0:
            return web.Response(status=503)
        return web.Response(text=vllm_exposition((1, 1), calls))

    _, info = await scrape_for(await serve(flaky), tmp_path, 0.5)
    assert info["unavailable"] is None
    assert info["failures"]["HTTP 503"] == calls // 2 and info["scrapes"] == calls - calls // 2


async def test_an_unreachable_endpoint_never_raises(tmp_path: Path) -> None:
    _, info = await scrape_for("http://127.0.0.1:9/metrics", tmp_path, 0.2)  # discard port: refused
    assert info["scrapes"] == 0 and info["failures"].get("ClientConnectorError", 0) >= 1


async def test_the_key_reaches_metrics_only_on_the_endpoints_own_host(serve, tmp_path: Path) -> None:
    from harness.client.backend import Endpoint
    from harness.config.scenario import parse_scenario
    from harness.run.runner import _scraper

    seen: list[str | None] = []

    async def metrics(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text=vllm_exposition((1, 1), 1))

    url = await serve(metrics)
    await scrape_for(url, tmp_path, 0.1, key="sk-secret")
    assert seen and set(seen) == {"Bearer sk-secret"}
    base = parse_scenario({"name": "k", "phases": [{"name": "p", "load": {"type": "constant", "rate": 1,
                                                                          "requests": 1}}]}, "t")
    same = base.model_copy(update={"endpoint": base.endpoint.model_copy(update={"metrics_url": url})})
    origin = url.removesuffix("/metrics")
    near = _scraper(same, Endpoint(origin + "/v1", "m", "chat", "sk-secret"), MonotonicClock(), tmp_path)
    far = _scraper(same, Endpoint("http://127.0.0.2:1/v1", "m", "chat", "sk-secret"), MonotonicClock(), tmp_path)
    assert near is not None and near._headers == {"Authorization": "Bearer sk-secret"}
    assert far is not None and far._headers == {}


async def test_a_huge_metrics_page_is_refused_not_read(serve, tmp_path: Path) -> None:
    huge = vllm_exposition((1, 0), 10) + "# padding " + "x" * (9 << 20) + "\n"

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=huge)

    scraper, info = await scrape_for(await serve(metrics), tmp_path, 0.3)
    assert info["unavailable"] == "/metrics over 8 MiB" and info["scrapes"] == 0
    assert scraper.rows == []
