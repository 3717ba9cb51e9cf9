"""Prompts of exact length without a tokenizer file: the endpoint's own `/tokenize` counts for us.

Before any load, the harness asks the server's `/tokenize` (llama.cpp's and vLLM's shapes) which words of its
vocabulary are one token each, alone and after a space, and builds prompts from those words only: with a
tokenizer that splits on spaces first (BPE and SentencePiece as served), n such words are n tokens. The tokens
the server adds around a prompt (a chat template, a BOS) are measured once with a one-token request and taken
off every prompt, so the server's `usage.prompt_tokens` equals the length asked for. A short prompt is then
checked end to end; anything that does not add up is an `EndpointError` before the run starts.

With no tokenizer given, `default_words` asks first whether the endpoint counts at all: where it offers no
`/tokenize`, or counts the harness's own words one token each (the bundled simulator), the words stay; where
it counts otherwise (vLLM, SGLang, llama.cpp), its words are found as above, so a first run is exact by
default.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from harness.client.backend import Endpoint, request_body
from harness.errors import BadChunk, EndpointError
from harness.stats.schema import ServerTokenizer
from harness.tokens import VOCAB, make_text, words_text
from harness.workload.requests import RequestSpec

Chosen = Literal["flag", "default"]  # asked for with --tokenizer server, or taken because no tokenizer was given
WANTED = 256  # one-token words enough for varied prompts; discovery stops here
MIN_WORDS = 32
_PARALLEL = 16
_CHECK_TOKENS = 100
_TRIES = 4  # a reset connection is tried again, as a request on a dead pooled connection is
_RETRY_S = 0.05


@dataclass(frozen=True, slots=True)
class ServerWords:
    """A text maker whose words are one token each at the server, and the server's own additions."""

    words: tuple[str, ...]
    overhead: int  # tokens the server adds around a one-turn prompt (chat template, BOS)

    def __call__(self, num_tokens: int, seed: int) -> str:
        return words_text(self.words, num_tokens, seed)

    def info(self, chosen: Chosen = "flag") -> ServerTokenizer:
        return ServerTokenizer(kind="server", words=len(self.words), template_overhead=self.overhead,
                               chosen=chosen)


@dataclass(frozen=True, slots=True)
class DefaultWords:
    """What a run with no tokenizer given builds its prompts from, and the plan line that says why."""

    words: ServerWords | None  # None: the harness's own words
    said: str
    warning: str | None = None


def tokenize_url(base_url: str) -> str:
    """llama.cpp and vLLM serve `/tokenize` at the root, beside `/v1`."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "/tokenize", "", ""))


class _Counter:
    def __init__(self, session: aiohttp.ClientSession, endpoint: Endpoint) -> None:
        self.session = session
        self.endpoint = endpoint
        self.url = tokenize_url(endpoint.base_url)
        self.headers = endpoint.request_headers

    async def count(self, text: str) -> int:
        # Both servers' fields at once: llama.cpp reads content/add_special, vLLM prompt/add_special_tokens.
        body = {"model": self.endpoint.model, "prompt": text, "content": text, "add_special": False,
                "add_special_tokens": False}
        status, data = await post_json(self.session, self.url, body, self.headers, "--tokenizer server needs the "
                                       "endpoint's /tokenize")
        if status != 200:
            raise EndpointError(f"POST {self.url} answered HTTP {status}: the endpoint cannot count tokens for "
                                "--tokenizer server", hint="give a local tokenizer.json instead")
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
    """The server's prompt count (its API's usage) for a one-turn request of `text`, one token generated,
    asked for whole in the endpoint's API."""
    spoken = endpoint.dialect
    body = request_body(RequestSpec("probe", "probe", 0, text, 0, 1, False), endpoint.model, endpoint.api,
                        extra=endpoint.extra_body, stream=False)
    why = "cannot measure the prompt template for --tokenizer server"
    status, data = await post_json(session, endpoint.url, body, endpoint.request_headers, why)
    try:
        counted = spoken.whole(orjson.dumps(data)).prompt_tokens if spoken.whole is not None else None
    except BadChunk:
        counted = None
    if status != 200 or counted is None:
        raise EndpointError(f"POST {endpoint.url} answered HTTP {status} without the prompt's token count: {why}",
                            hint="the endpoint must report usage on a non-streamed request")
    return counted


async def post_json(session: aiohttp.ClientSession, url: str, body: dict[str, object], headers: dict[str, str],
                    why: str) -> tuple[int, Any]:
    """(status, JSON body) of a POST. A connection the server closed or reset before answering — a keep-alive
    it dropped as we reused it, a server shedding connections — is tried again on a fresh one, as requests
    are; the last cause is named when every try failed."""
    attempt = 0
    while True:
        try:
            async with session.post(url, json=body, headers=headers) as resp:
                return resp.status, await resp.json(content_type=None)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            attempt += 1
            if attempt >= _TRIES:
                raise EndpointError(f"POST {url}: the server closed the connection before answering, {_TRIES} "
                                    f"times ({type(exc).__name__}: {exc}): {why}",
                                    hint="the server drops connections: check its logs, its connection limit and "
                                         "keep-alive timeout") from None
            await asyncio.sleep(_RETRY_S * attempt)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise EndpointError(f"POST {url} failed ({type(exc).__name__}: {exc}): {why}") from None


def _probe_session(endpoint: Endpoint, timeout_s: float) -> aiohttp.ClientSession:
    # One connection a probe, closed after its answer: no idle keep-alive of ours holds one of a small
    # server's HTTP threads (llama.cpp's) when the run's own connections arrive.
    tls = endpoint.tls()
    connector = aiohttp.TCPConnector(force_close=True, limit=_PARALLEL, ssl=tls if tls is not None else True)
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), connector=connector)


async def server_words(endpoint: Endpoint, timeout_s: float = 30.0) -> ServerWords:
    """Ask the endpoint which words are one token and what it adds around a prompt; check the result."""
    async with _probe_session(endpoint, timeout_s) as session:
        return await _discover(session, endpoint)


async def default_words(endpoint: Endpoint, timeout_s: float = 5.0) -> DefaultWords:
    """No tokenizer given: the server's words where its `/tokenize` counts the harness's own otherwise; the
    harness's words where it has none, or where they are already one token each. A probe that fails after the
    endpoint said it counts falls back to the words with a warning (`--tokenizer server` makes it an error).
    Each probe waits `timeout_s` at most: an endpoint that does not answer one costs a run that long, no
    more."""
    url = tokenize_url(endpoint.base_url)
    async with _probe_session(endpoint, timeout_s) as session:
        counter = _Counter(session, endpoint)
        try:
            counted = await counter.count(make_text(_CHECK_TOKENS, 0))
        except EndpointError:
            return DefaultWords(None, f"prompts of the harness's words, one token a word: {url} did not count "
                                      "them (give --tokenizer PATH for exact lengths on a real model)")
        if counted == _CHECK_TOKENS:
            return DefaultWords(None, f"prompts of the harness's words: {url} counts them one token each")
        try:
            found = await _discover(session, endpoint)
        except EndpointError as exc:
            return DefaultWords(None, f"prompts of the harness's words ({url} could not be used: {exc})",
                                warning=f"prompts may be longer than asked: {url} counted {counted} tokens in "
                                        f"{_CHECK_TOKENS} words, and its words could not be found: {exc}")
    template = f"{found.overhead} token{'s' * (found.overhead != 1)} of template"
    return DefaultWords(found, f"prompts of exact length, counted by the endpoint's {url} ({len(found.words)} "
                               f"one-token words, {template} taken off; --tokenizer words to skip)")


async def _discover(session: aiohttp.ClientSession, endpoint: Endpoint) -> ServerWords:
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
