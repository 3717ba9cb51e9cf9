"""Prompts of exact length without a tokenizer file: the endpoint's own `/tokenize` counts for us.

Before any load, the harness asks the server's `/tokenize` (llama.cpp's and vLLM's shapes) which words of its
vocabulary are one token each, alone and after a space, and builds prompts from those words only: with a
tokenizer that splits on spaces first (BPE and SentencePiece as served), n such words are n tokens. The tokens
the server adds around a prompt (a chat template, a BOS) are measured once with a one-token request and taken
off every prompt, so the server's `usage.prompt_tokens` equals the length asked for. A short prompt is then
checked end to end; anything that does not add up is an `EndpointError` before the run starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from harness.client.backend import Endpoint
from harness.errors import EndpointError
from harness.stats.schema import ServerTokenizer
from harness.tokens import VOCAB, words_text

WANTED = 256  # one-token words enough for varied prompts; discovery stops here
MIN_WORDS = 32
_PARALLEL = 16
_CHECK_TOKENS = 100


@dataclass(frozen=True, slots=True)
class ServerWords:
    """A text maker whose words are one token each at the server, and the server's own additions."""

    words: tuple[str, ...]
    overhead: int  # tokens the server adds around a one-turn prompt (chat template, BOS)

    def __call__(self, num_tokens: int, seed: int) -> str:
        return words_text(self.words, num_tokens, seed)

    def info(self) -> ServerTokenizer:
        return ServerTokenizer(kind="server", words=len(self.words), template_overhead=self.overhead)


def tokenize_url(base_url: str) -> str:
    """llama.cpp and vLLM serve `/tokenize` at the root, beside `/v1`."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "/tokenize", "", ""))


class _Counter:
    def __init__(self, session: aiohttp.ClientSession, endpoint: Endpoint) -> None:
        self.session = session
        self.endpoint = endpoint
        self.url = tokenize_url(endpoint.base_url)
        self.headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}

    async def count(self, text: str) -> int:
        # Both servers' fields at once: llama.cpp reads content/add_special, vLLM prompt/add_special_tokens.
        body = {"model": self.endpoint.model, "prompt": text, "content": text, "add_special": False,
                "add_special_tokens": False}
        try:
            async with self.session.post(self.url, json=body, headers=self.headers) as resp:
                if resp.status != 200:
                    raise EndpointError(f"POST {self.url} answered HTTP {resp.status}: the endpoint cannot count "
                                        "tokens for --tokenizer server (give a local tokenizer.json instead)")
                data = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise EndpointError(f"POST {self.url} failed ({type(exc).__name__}): --tokenizer server needs the "
                                "endpoint's /tokenize") from None
        return _token_count(data, self.url)

    async def one_token_words(self, candidates: Sequence[str]) -> list[str]:
        found: list[str] = []
        for start in range(0, len(candidates), _PARALLEL):
            batch = candidates[start:start + _PARALLEL]
            alone = await asyncio.gather(*(self.count(w) for w in batch))
            twice = await asyncio.gather(*(self.count(f"{w} {w}") for w in batch))
            found += [w for w, a, b in zip(batch, alone, twice, strict=True) if a == 1 and b == 2]
            if len(found) >= WANTED:
                break
        return found[:WANTED]


def _token_count(data: Any, url: str) -> int:
    if isinstance(data, dict):
        if isinstance(data.get("count"), int):
            return int(data["count"])
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
    raise EndpointError(f"POST {url} did not answer with tokens or a count")


async def _prompt_tokens(session: aiohttp.ClientSession, endpoint: Endpoint, text: str) -> int:
    """The server's `usage.prompt_tokens` for a one-turn request of `text` (one token generated)."""
    body: dict[str, Any] = {"model": endpoint.model, "max_tokens": 1, "stream": False}
    if endpoint.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    try:
        async with session.post(endpoint.url, json=body, headers=headers) as resp:
            data = await resp.json(content_type=None)
        return int(data["usage"]["prompt_tokens"])
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
        raise EndpointError(f"POST {endpoint.url} gave no usage.prompt_tokens ({type(exc).__name__}): cannot "
                            "measure the prompt template for --tokenizer server") from None


async def server_words(endpoint: Endpoint, timeout_s: float = 30.0) -> ServerWords:
    """Ask the endpoint which words are one token and what it adds around a prompt; check the result."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        counter = _Counter(session, endpoint)
        words = await counter.one_token_words(VOCAB)
        if len(words) < MIN_WORDS:
            raise EndpointError(f"{counter.url}: only {len(words)} of the harness's words are one token for this "
                                "model; give a local tokenizer.json instead of --tokenizer server")
        maker = ServerWords(tuple(words), 0)
        probe = maker(16, 1)
        overhead = await _prompt_tokens(session, endpoint, probe) - 16
        sample = maker(_CHECK_TOKENS, 2)
        counted = await counter.count(sample)
        if counted != _CHECK_TOKENS or overhead < 0:
            raise EndpointError(f"{counter.url}: a prompt of {_CHECK_TOKENS} one-token words counted {counted} "
                                f"(template {overhead}): this tokenizer does not split on spaces; give a local "
                                "tokenizer.json instead of --tokenizer server")
        return ServerWords(tuple(words), overhead)
