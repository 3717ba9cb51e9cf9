"""Embeddings (`/v1/embeddings`) as the simulator answers them: each text a prefill-only request to the engine
(its one step is the prompt's: what a pooling model runs), the answer whole once every text of the request is
through, one seeded vector each."""

from __future__ import annotations

import zlib

import numpy as np

from harness.sim.openai_shapes import Json
from harness.sim.requests import BadRequest

DIMENSIONS = 256  # a vector's length unless the request asks (`dimensions`); real models' are 384–4,096
MAX_INPUTS = 2048  # texts in one request, as OpenAI's API allows


def texts(body: Json) -> list[list[str]]:
    """The request's texts as words (the simulator's tokens): `input` a string, a list of strings, or token
    ids."""
    given = body.get("input")
    items = [given] if isinstance(given, str) or (isinstance(given, list) and given
                                                  and all(isinstance(t, int) for t in given)) else given
    if not isinstance(items, list) or not items or len(items) > MAX_INPUTS:
        raise BadRequest(f"'input' must be a string or a list of 1 to {MAX_INPUTS} texts", "input")
    out = []
    for item in items:
        if isinstance(item, str) and item.split():
            out.append(item.split())
        elif isinstance(item, list) and item and all(isinstance(t, int) and not isinstance(t, bool) for t in item):
            out.append([f"t{t}" for t in item])
        else:
            raise BadRequest("each input must be a non-empty string or list of token ids", "input")
    return out


def prompt(body: Json) -> str:
    return " ".join(" ".join(words) for words in texts(body))


def dimensions(body: Json) -> int:
    asked = body.get("dimensions", DIMENSIONS)
    if not isinstance(asked, int) or isinstance(asked, bool) or not 1 <= asked <= 8192:
        raise BadRequest("'dimensions' must be an integer from 1 to 8192", "dimensions")
    return asked


def vector(words: list[str], size: int) -> list[float]:
    """A unit vector seeded by the text: the same text always embeds the same."""
    v = np.random.default_rng(zlib.crc32(" ".join(words).encode())).standard_normal(size)
    return [round(float(x), 6) for x in v / np.linalg.norm(v)]


def answer(request_id: str, model: str, created: int, inputs: list[list[str]], size: int) -> Json:
    tokens = sum(len(words) for words in inputs)
    return {"id": f"embd-{request_id}", "object": "list", "created": created, "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": vector(words, size)}
                     for i, words in enumerate(inputs)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
