"""What real engines do that the bundled simulator does not, against a llama.cpp-shaped loopback server
(tests/llamacpp_like.py): a prompt cache, its own tokenizer and chat template, its /metrics names, a context
that cuts answers short, error messages of its own."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.errors import EndpointError
from harness.records_read import read_records
from harness.report.notes import notes
from harness.run.result import RunResult
from harness.run.runner import run_scenario
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
    # This llama.cpp exports no KV cache gauge: the empty row says why, and only that row does.
    said = [n for n in notes(result.summary) if "series" in n]
    assert len(said) == 1 and "no kv_cache_usage series" in said[0] and "llamacpp:kv_cache_usage_ratio" in said[0]
    assert '"KV cache usage, max" row shows -' in said[0]
    # llama.cpp's own timings of each request are kept with its record.
    records = list(read_records(result.run_dir / "requests.jsonl"))
    assert all(r.server_prompt_ms is not None and r.server_decode_ms is not None for r in records)
    assert {round(r.server_prompt_ms or 0, 2) for r in records} == {
        round(0.05 * ((r.prompt_tokens or 0) - (r.cached_tokens or 0)), 2) for r in records}


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
    (words,) = (await run(LlamaCppLike(), tmp_path, "words", workload={"tokenizer": "words"})).summary.phases
    assert words.tokens.prompt_mismatched == 12 and words.tokens.prompt_diff_mean is not None
    assert words.tokens.prompt_diff_mean > CHAT_TEMPLATE  # the template, and the words of two tokens
    assert any("counted other than asked" in w for w in words.warnings)
    for api, overhead in (("chat", CHAT_TEMPLATE), ("completions", 1)):
        result = await run(LlamaCppLike(), tmp_path, f"server-{api}", workload={"tokenizer": "server"}, api=api)
        (phase,) = result.summary.phases
        assert phase.tokens.prompt_reported == 12 and phase.tokens.prompt_mismatched == 0, api
        assert result.summary.run.tokenizer is not None
        assert result.summary.run.tokenizer.template_overhead == overhead
        assert result.summary.run.tokenizer.chosen == "flag"


async def test_with_no_tokenizer_given_a_server_that_counts_gets_prompts_of_exact_length(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first run against vLLM or llama.cpp was 17% long by default; where the endpoint offers /tokenize and
    counts the harness's words otherwise, its own words are used, and the plan says so. Without /tokenize the
    words stay, and the table's mismatch row and warning say what they did."""
    result = await run(LlamaCppLike(), tmp_path, "default")
    (phase,) = result.summary.phases
    assert phase.tokens.prompt_reported == 12 and phase.tokens.prompt_mismatched == 0
    assert result.summary.run.tokenizer is not None and result.summary.run.tokenizer.chosen == "default"
    assert result.summary.run.tokenizer.template_overhead == CHAT_TEMPLATE
    assert "prompts of exact length, counted by the endpoint's" in capsys.readouterr().err

    plain = await run(LlamaCppLike(serves_tokenize=False), tmp_path, "no-tokenize")
    (phase,) = plain.summary.phases
    assert phase.tokens.prompt_mismatched == 12 and plain.summary.run.tokenizer is None
    assert "/tokenize did not count them (give --tokenizer PATH" in capsys.readouterr().err

    # A /tokenize that counts, but whose words are not tokens: the run goes on with the words, and warns.
    odd = await run(LlamaCppLike(tokenize_chars=True), tmp_path, "chars")
    (phase,) = odd.summary.phases
    assert phase.requests.ok == 12 and odd.summary.run.tokenizer is None
    assert "prompts may be longer than asked" in capsys.readouterr().err


async def test_a_connection_reset_while_probing_tokenize_is_tried_again_and_the_run_goes_on(tmp_path: Path) -> None:
    """The keep-alive race seen against llama.cpp (15 of 62 runs failed before any load): a reset during the
    `/tokenize` probing is retried like a request; a server that resets every time is named for what it does."""
    flaky = LlamaCppLike(reset_tokenize_every=3)
    result = await run(flaky, tmp_path, "flaky", workload={"tokenizer": "server"})
    (phase,) = result.summary.phases
    assert phase.requests.ok == 12 and phase.tokens.prompt_mismatched == 0
    assert flaky.tokenize_calls > 3  # some were reset, and tried again
    with pytest.raises(EndpointError) as refused:
        await run(LlamaCppLike(reset_tokenize_every=1), tmp_path, "dead", workload={"tokenizer": "server"})
    assert "closed the connection before answering, 4 times" in str(refused.value)
    assert "drops connections" in refused.value.hint and "API key" not in refused.value.hint


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
    # The sentence reaches summary.json beside its cause, and the notes the terminal and report.html show.
    (phase,) = result.summary.phases
    assert phase.requests.failure_reasons == {"HTTP 500 server_error": 3}
    said = phase.requests.failure_messages["HTTP 500 server_error"]
    assert said.startswith("upstream rejected key [REDACTED]: xxx") and len(said) <= 500 and SECRET not in said
    line = next(n for n in notes(result.summary) if "the server said" in n)
    assert line.startswith('phase p: HTTP 500 server_error ×3: the server said "upstream rejected key [REDACTED]')
    assert len(line) < 320 and SECRET not in line


async def _lag_the_loop(every_s: float, block_s: float) -> None:
    """The harness's event loop held now and then, as a CPU-bound server on the same machine would hold it."""
    while True:
        await asyncio.sleep(every_s)
        time.sleep(block_s)


async def _late_run(server: LlamaCppLike, tmp: Path, name: str, block_s: float = 0.008,
                    requests: int = 8) -> RunResult:
    lag = asyncio.ensure_future(_lag_the_loop(0.05, block_s))
    try:
        return await run(server, tmp, name, requests=requests, workload={"output_tokens": 6})
    finally:
        lag.cancel()


@pytest.mark.timing
async def test_a_server_whose_queue_grows_while_the_harness_idles_is_the_bottleneck(tmp_path: Path) -> None:
    """Four slots, 250 ms a token: requests wait at the server (its deferred gauge rises) while the harness, a
    little late now and then (8 ms), uses almost no CPU. The self-check sees the lateness; set beside 250 ms
    tokens and a queue at the server, the phase is server-limited, not client-limited. The same lateness against
    a fast server (1 ms tokens, no queue) stays the client's."""
    # 24 requests: at 50/s their sending spans ~0.5 s, so a few ms of lateness cannot move the sent rate by 5%.
    # Four slots, not two: the 24 still arrive together (a queue of 20), in half the time (issue 65).
    (slow,) = (await _late_run(LlamaCppLike(slots=4, token_s=0.25), tmp_path, "slow", requests=24)).summary.phases
    assert slow.server is not None and (slow.server.waiting_max or 0) > 0
    assert (slow.client.loop_lag_p99_ms or 0) > 5.0  # the self-check did see the harness late…
    # … but 8 ms moves no figure of 250 ms tokens by 5%: nothing flagged, and the server's queue set the pace.
    assert not slow.client_limited and slow.client_limited_metrics == [] and slow.bottleneck == "server", (
        slow.client_limited_reason, slow.client_moved)
    assert slow.client.verdict == "ok"  # the summary says one thing
    assert max(slow.client_moved.get(f"itl_{q}", 0.0) for q in ("p50", "p90", "p99")) < 0.05
    # Against 1 ms tokens the phase lasts a fraction of a second: a longer one, and lateness well past the
    # self-check's 5 ms bound, so that it surely sees it (its p99 over a few samples may miss an 8 ms block).
    (fast,) = (await _late_run(LlamaCppLike(), tmp_path, "fast", block_s=0.015, requests=40)).summary.phases
    assert (fast.client.loop_lag_p99_ms or 0) > 5.0, fast.client
    assert fast.client_limited and fast.bottleneck == "client", fast.warnings
    assert "itl_p99" in fast.client_limited_metrics, fast.client_moved  # 15 ms on 1 ms gaps
