"""What an endpoint says of its engine before `harness sim twin` designs its runs: how many requests it decodes
at once (llama-server's `/props` `total_slots`, SGLang's `/get_server_info` `max_running_requests`) and each
request's context. vLLM says neither over HTTP (its `max_num_seqs` is in no endpoint or metric): `--slots`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from harness.client.aio import get_json


@dataclass(frozen=True)
class EngineInfo:
    slots: int | None
    source: str  # where `slots` came from, in words
    context_tokens: int | None  # one request's context, where the engine said it


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


async def discover(session: aiohttp.ClientSession, base_url: str, headers: Mapping[str, str] | None) -> EngineInfo:
    """The first engine description the endpoint serves; an empty one when it serves none."""
    top = root(base_url)
    for path, read in (("/props", from_props), ("/get_server_info", from_server_info)):
        if (info := read(await get_json(session, top + path, headers))) is not None:
            return info
    return EngineInfo(None, "", None)
