"""A small loopback server shaped like llama.cpp's llama-server, for tests of what real engines do that the
bundled simulator does not: its own tokenizer (some words two tokens, a chat template of 8 tokens, a BOS), a
prompt cache keyed on the prompt's tokens (`timings.cache_n`), a 2,048-token context that cuts answers short
(`finish_reason: "length"`) or refuses prompts with its own sentence, `/tokenize`, and `/metrics` under
llama.cpp's names. One SSE event per socket write, as llama-server streams.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CHAT_TEMPLATE = 8  # tokens a one-turn chat adds around the user's text
N_CTX = 2048


def word_tokens(word: str) -> int:
    """The server's tokenizer: a quarter of the words are two tokens."""
    return 2 if zlib.crc32(word.encode()) % 4 == 0 else 1


def tokenize(text: str) -> list[int]:
    ids: list[int] = []
    for word in text.split():
        ids += [zlib.crc32(f"{word}/{k}".encode()) for k in range(word_tokens(word))]
    return ids


@dataclass
class LlamaCppLike:
    api_key: str | None = None
    metric_prefix: str = "llamacpp:"  # another engine's names, for the user-mapping test
    error_message: str | None = None  # every completion fails with HTTP 500 and this message
    reset_tokenize_every: int = 0  # every k-th /tokenize: the connection reset before any answer (1: all)
    serves_tokenize: bool = True  # False: no /tokenize (404), as a gateway or a hosted API
    tokenize_chars: bool = False  # /tokenize counts characters: a tokenizer whose words are not tokens
    slots: int = 0  # requests decoded at once (llama-server's -np); beyond them a request waits (0: no limit)
    token_s: float = 0.001  # between two tokens of a stream
    deferred: int = 0
    tokenize_calls: int = 0
    seen: list[list[int]] = field(default_factory=list)  # prompts (as tokens) in the cache
    prompt_total: int = 0
    cached_total: int = 0
    predicted_total: int = 0
    processing: int = 0

    def prompt(self, body: dict[str, Any], chat: bool) -> list[int]:
        if chat:
            text = " ".join(str(m.get("content", "")) for m in body["messages"])
            return [1] * CHAT_TEMPLATE + tokenize(text)
        return [1, *tokenize(str(body["prompt"]))]  # BOS

    def cache_hit(self, ids: list[int]) -> int:
        """The longest prefix shared with any earlier prompt (llama.cpp reuses a slot's common prefix)."""
        best = 0
        for old in self.seen:
            n = 0
            for a, b in zip(old, ids, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return min(best, len(ids) - 1)

    async def complete(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"code": 401, "message": "Invalid API Key",
                                                "type": "authentication_error"}}, status=401)
        if self.error_message is not None:
            return web.json_response({"error": {"code": 500, "message": self.error_message,
                                                "type": "server_error"}}, status=500)
        body = await request.json()
        ids = self.prompt(body, request.path.endswith("chat/completions"))
        if len(ids) >= N_CTX:
            message = (f"request ({len(ids)} tokens) exceeds the available context size ({N_CTX} tokens), "
                       "try increasing it")
            return web.json_response({"error": {"code": 400, "message": message,
                                                "type": "exceed_context_size_error"}}, status=400)
        cached = self.cache_hit(ids)
        self.seen.append(ids)
        self.prompt_total += len(ids) - cached
        self.cached_total += cached
        n = min(int(body.get("max_tokens") or 16), N_CTX - len(ids))
        if not body.get("stream"):
            return web.json_response({"choices": [{"index": 0, "message": {"content": " x" * n},
                                                   "finish_reason": "length"}],
                                      "usage": {"prompt_tokens": len(ids), "completion_tokens": n,
                                                "total_tokens": len(ids) + n}})
        return await self._stream(request, len(ids), cached, n)

    async def _stream(self, request: web.Request, prompt: int, cached: int, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        while self.slots and self.processing >= self.slots:  # every slot busy: the request waits for one
            self.deferred += 1
            await asyncio.sleep(0.01)
            self.deferred -= 1
        self.processing += 1
        try:
            for _ in range(n):
                event = {"choices": [{"index": 0, "delta": {"content": " x"}, "finish_reason": None}]}
                await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")  # one token per write
                await asyncio.sleep(self.token_s)
                self.predicted_total += 1
            last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n},
                    "timings": {"cache_n": cached, "prompt_n": prompt - cached, "predicted_n": n,
                                "prompt_ms": 0.05 * (prompt - cached), "predicted_ms": n * self.token_s * 1e3}}
            await resp.write(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")
        finally:
            self.processing -= 1
        return resp

    async def tokenize(self, request: web.Request) -> web.Response:
        self.tokenize_calls += 1
        if self.reset_tokenize_every and self.tokenize_calls % self.reset_tokenize_every == 0:
            assert request.transport is not None
            request.transport.abort()  # RST: what a server shedding a connection it was keeping alive sends
            return web.Response()
        body = await request.json()
        text = str(body.get("content", body.get("prompt", "")))
        special = [1] if body.get("add_special") else []
        counted = list(range(len(text))) if self.tokenize_chars else tokenize(text)
        return web.json_response({"tokens": special + counted})

    async def metrics(self, request: web.Request) -> web.Response:
        p = self.metric_prefix
        lines = [f"# TYPE {p}prompt_tokens_total counter", f"{p}prompt_tokens_total {self.prompt_total}",
                 f"# TYPE {p}prompt_tokens_cached_total counter",
                 f"{p}prompt_tokens_cached_total {self.cached_total}",
                 f"# TYPE {p}tokens_predicted_total counter", f"{p}tokens_predicted_total {self.predicted_total}",
                 f"# TYPE {p}requests_processing gauge", f"{p}requests_processing {self.processing}",
                 f"# TYPE {p}requests_deferred gauge", f"{p}requests_deferred {self.deferred}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny.gguf", "object": "model"}]})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.complete)
        app.router.add_post("/v1/completions", self.complete)
        if self.serves_tokenize:
            app.router.add_post("/tokenize", self.tokenize)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/v1/models", self.models)
        return app


@asynccontextmanager
async def serving(server: LlamaCppLike) -> AsyncIterator[str]:
    """The server on a free loopback port; yields its base URL (…/v1)."""
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()
