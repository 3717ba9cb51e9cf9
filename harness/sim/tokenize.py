"""`POST /tokenize` as vLLM serves it (and llama.cpp's field names too): the simulator's one-token-per-word
count."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from harness.sim.openai_shapes import error_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def tokenize_handler(max_model_len: int, authorised: Callable[[web.Request], bool],
                     unauthorised: Callable[[], web.Response]) -> Handler:
    async def tokenize(request: web.Request) -> web.StreamResponse:
        if not authorised(request):
            return unauthorised()
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "body must be JSON", "invalid_request_error")
        text = body.get("prompt", body.get("content")) if isinstance(body, dict) else None
        if not isinstance(text, str):
            return error_response(400, "give 'prompt' (or 'content') as a string", "invalid_request_error", "prompt")
        words = text.split()
        # Token ids stand in for words: the simulator's tokenizer is one token per word, with no specials.
        return web.json_response({"count": len(words), "max_model_len": max_model_len,
                                  "tokens": list(range(len(words)))})

    return tokenize
