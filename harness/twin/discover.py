"""What an endpoint says of its engine before `harness sim twin` designs its runs: how many requests it
decodes at once (llama-server's `/props` `total_slots`, SGLang's `/get_server_info` `max_running_requests`),
each request's context and its KV cache. vLLM says its context (`/v1/models` `max_model_len`) and its KV cache
(`vllm:cache_config_info`), not its `max_num_seqs`: `twin_slots` measures that with a burst, or `--slots`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from harness.client.aio import get_json, list_models
from harness.errors import EndpointError

VLLM_RUNNING = "vllm:num_requests_running"
KV_MAX = 1 << 36  # tokens: past any device's KV cache (an H200 node holds a few million); a larger figure is a typo


@dataclass(frozen=True)
class EngineInfo:
    slots: int | None
    source: str  # where `slots` came from, in words
    context_tokens: int | None  # one request's context, where the engine said it
    kv_tokens: int | None = None  # the KV cache's capacity in tokens, where the engine said it
    counts_running: bool = False  # its /metrics has a running gauge: a burst can measure its slots


def root(base_url: str) -> str:
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20 else None


def from_props(props: object) -> EngineInfo | None:
    """llama-server's `/props`: `total_slots`, and `default_generation_settings.n_ctx` (a slot's context)."""
    if not isinstance(props, dict) or (slots := _count(props.get("total_slots"))) is None:
        return None
    settings = props.get("default_generation_settings")
    context = _count(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return EngineInfo(slots, "llama-server /props total_slots", context)


def from_server_info(info: object) -> EngineInfo | None:
    """SGLang's `/get_server_info`: `max_running_requests`, `context_length`."""
    if not isinstance(info, dict) or (slots := _count(info.get("max_running_requests"))) is None:
        return None
    return EngineInfo(slots, "SGLang /get_server_info max_running_requests", _count(info.get("context_length")))


def from_vllm_metrics(text: str, context: int | None) -> EngineInfo | None:
    """vLLM's `/metrics`: `vllm:cache_config_info`'s labels give its KV cache (`kv_cache_size_tokens`, or
    `num_gpu_blocks` × `block_size` on versions without it); None where the page is not vLLM's."""
    if VLLM_RUNNING not in text:
        return None
    kv: int | None = None
    try:
        for family in text_string_to_metric_families(text):
            if family.name == "vllm:cache_config_info":
                labels = family.samples[0].labels if family.samples else {}
                said = _int(labels.get("kv_cache_size_tokens")) or (
                    (_int(labels.get("num_gpu_blocks")) or 0) * (_int(labels.get("block_size")) or 0))
                kv = said if 0 < said <= KV_MAX else None
    except ValueError:  # a page prometheus_client cannot parse: no KV figure, still vLLM's running gauge
        kv = None
    return EngineInfo(None, "", context, kv, counts_running=True)


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


async def _metrics_text(session: aiohttp.ClientSession, url: str, headers: Mapping[str, str] | None) -> str:
    try:
        async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            return (await resp.content.read(4 << 20)).decode("utf-8", "replace") if resp.status == 200 else ""
    except (aiohttp.ClientError, TimeoutError):
        return ""


async def discover(session: aiohttp.ClientSession, base_url: str, headers: Mapping[str, str] | None) -> EngineInfo:
    """The first engine description the endpoint serves; an empty one when it serves none."""
    top = root(base_url)
    for path, read in (("/props", from_props), ("/get_server_info", from_server_info)):
        if (info := read(await get_json(session, top + path, headers))) is not None:
            return info
    contexts: dict[str, int] = {}
    try:
        await list_models(session, base_url, headers, contexts=contexts)
    except EndpointError:
        contexts = {}
    context = next(iter(contexts.values()), None)
    found = from_vllm_metrics(await _metrics_text(session, top + "/metrics", headers), context)
    return found or EngineInfo(None, "", context)
