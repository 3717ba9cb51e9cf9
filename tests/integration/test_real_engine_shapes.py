"""What real engines do that the bundled simulator does not, against a llama.cpp-shaped loopback server
(tests/llamacpp_like.py): a prompt cache, its own tokenizer and chat template, its /metrics names, a context
that cuts answers short, error messages of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.records import read_records
from harness.run.runner import RunResult, run_scenario
from tests.llamacpp_like import CHAT_TEMPLATE, LlamaCppLike, serving

SECRET = "sk-llama-0123456789abcdef"


def scenario(workload: dict[str, Any] | None = None, requests: int = 12, api: str = "chat",
             endpoint: dict[str, Any] | None = None) -> Any:
    return parse_scenario({
        "name": "llama", "workload": {"prompt_tokens": 128, "output_tokens": 8, **(workload or {})},
        "endpoint": {"api": api, "scrape_interval_s": 0.1, **(endpoint or {})},
        "phases": [{"name": "p", "load": {"type": "poisson", "rate": 50, "requests": requests}}],
    }, "test")


async def run(server: LlamaCppLike, tmp: Path, name: str, key: str | None = None, **kw: Any) -> RunResult:
    sc = scenario(**kw)
    async with serving(server) as url:
        return await run_scenario(sc, Endpoint(url, "tiny.gguf", sc.endpoint.api, key), tmp / name)


async def test_a_rerun_meets_no_prompt_cache_unless_the_scenario_asks(tmp_path: Path) -> None:
    server = LlamaCppLike()
    await run(server, tmp_path, "first")
    (again,) = (await run(server, tmp_path, "again")).summary.phases
    assert again.tokens.cached_reported == 12
    # Only the chat template's tokens match an earlier prompt (and now and then a first word, as at a real
    # server: 980 words to start with): the rerun's prompts are its own.
    assert 12 * CHAT_TEMPLATE <= again.tokens.prompt_cached < 12 * (CHAT_TEMPLATE + 3)
    assert again.tokens.cached_share is not None and again.tokens.cached_share < 0.1
    assert not any("cache" in w for w in again.warnings)

    reuse = LlamaCppLike()
    await run(reuse, tmp_path, "warm-1", workload={"prompt_reuse": "across_runs"})
    (warm,) = (await run(reuse, tmp_path, "warm-2", workload={"prompt_reuse": "across_runs"})).summary.phases
    assert warm.tokens.cached_share is not None and warm.tokens.cached_share > 0.95
    assert any("from its cache" in w for w in warm.warnings)


async def test_llama_cpp_metrics_fill_the_server_view(tmp_path: Path) -> None:
    server = LlamaCppLike()
    result = await run(server, tmp_path, "m", workload={"prompt_reuse": "across_runs"}, requests=30)
    (phase,) = result.summary.phases
    assert phase.server is not None and result.summary.server_metrics is not None
    assert {"running", "waiting", "generation_tokens_total", "prompt_tokens_total",
            "prefix_cache_hits_total"} <= set(result.summary.server_metrics.series)
    assert phase.server.generation_tokens_per_s and phase.server.generation_tokens_per_s > 0
    # llama.cpp counts the cached and the computed prompt tokens: the share is hits / (hits + computed).
    share = phase.server.prefix_cache_hit_share
    assert share is not None and 0 < share < 0.2


async def test_an_engine_nobody_mapped_is_read_through_the_scenario(tmp_path: Path) -> None:
    plain = await run(LlamaCppLike(metric_prefix="myengine_"), tmp_path, "plain")
    assert plain.summary.server_metrics is not None
    assert plain.summary.server_metrics.unavailable == "no known series"
    mapping = {"running": "myengine_requests_processing", "generation_tokens_total": "myengine_tokens_predicted_total"}
    mapped = await run(LlamaCppLike(metric_prefix="myengine_"), tmp_path, "mapped",
                       endpoint={"server_metrics": mapping})
    assert mapped.summary.server_metrics is not None
    assert mapped.summary.server_metrics.series == ["generation_tokens_total", "running"]
    (phase,) = mapped.summary.phases
    assert phase.server is not None and phase.server.running_max is not None


async def test_tokenizer_server_makes_every_prompt_the_length_asked(tmp_path: Path) -> None:
    (words,) = (await run(LlamaCppLike(), tmp_path, "words")).summary.phases
    assert words.tokens.prompt_mismatched == 12 and words.tokens.prompt_diff_mean is not None
    assert words.tokens.prompt_diff_mean > CHAT_TEMPLATE  # the template, and the words of two tokens
    assert any("counted other than asked" in w for w in words.warnings)
    for api, overhead in (("chat", CHAT_TEMPLATE), ("completions", 1)):
        result = await run(LlamaCppLike(), tmp_path, f"server-{api}", workload={"tokenizer": "server"}, api=api)
        (phase,) = result.summary.phases
        assert phase.tokens.prompt_reported == 12 and phase.tokens.prompt_mismatched == 0, api
        assert result.summary.run.tokenizer is not None
        assert result.summary.run.tokenizer.template_overhead == overhead


async def test_the_context_limit_cuts_answers_and_refuses_prompts_in_its_own_words(tmp_path: Path) -> None:
    too_long = await run(LlamaCppLike(), tmp_path, "long", workload={"prompt_tokens": 3000}, requests=2)
    rec = next(iter(read_records(too_long.run_dir / "requests.jsonl")))
    assert rec.status == "http_error" and rec.reason == "HTTP 400 exceed_context_size_error"
    assert "exceeds the available context size (2048 tokens)" in rec.message
    cut = await run(LlamaCppLike(), tmp_path, "cut", requests=2, api="completions",
                    workload={"prompt_tokens": 1500, "output_tokens": 600, "ignore_eos": False})
    (phase,) = cut.summary.phases
    assert phase.requests.by_status["truncated"] == 2
    assert phase.requests.failure_reasons == {"context full": 2}
    assert all(r.finish_reason == "length" for r in cut.records)


async def test_a_long_error_message_is_kept_capped_and_without_the_key(tmp_path: Path) -> None:
    server = LlamaCppLike(api_key=SECRET, error_message=f"upstream rejected key {SECRET}: " + "x" * 5000)
    result = await run(server, tmp_path, "err", key=SECRET, requests=3)
    records = list(read_records(result.run_dir / "requests.jsonl"))
    assert len(records) == 3
    for rec in records:
        assert rec.reason == "HTTP 500 server_error"
        assert rec.message.startswith("upstream rejected key [REDACTED]: xxx") and len(rec.message) <= 500
    assert SECRET not in (result.run_dir / "requests.jsonl").read_text()
