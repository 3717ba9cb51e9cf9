"""Images in a prompt, as the simulator prices them: each image's size read from its bytes, its tokens in the
prefill as a Qwen2-VL-style encoder makes them (one token per `patch_px` × `patch_px` pixels: 14-pixel patches
merged 2 × 2), and the encoder's own compute before the prefill (2 × its parameters × its patches FLOPs).

Only base64 images are read (a `data:` URL, or Anthropic's base64 source): the simulator fetches nothing."""

from __future__ import annotations

import base64
import binascii
import io
import math
import zlib

from PIL import Image, UnidentifiedImageError

from harness.sim.openai_shapes import Json
from harness.sim.requests import BadRequest

ENCODER_MFU = 0.5  # the share of the device's peak a vision encoder's matmuls reach (assumed)
MAX_PIXELS = 4096 * 4096


def _parts(body: Json) -> list[object]:
    """Every content part of every message (chat's and Anthropic's `messages`, the Responses API's
    `input`)."""
    out: list[object] = []
    for field in ("messages", "input"):
        turns = body.get(field)
        for turn in turns if isinstance(turns, list) else []:
            content = turn.get("content") if isinstance(turn, dict) else None
            out.extend(content if isinstance(content, list) else [])
    return out


def _base64(part: object) -> str | None:
    """The base64 data of an image part in any API's shape; None for a part that is not an image."""
    if not isinstance(part, dict):
        return None
    kind, url = part.get("type"), None
    if kind == "image_url":  # chat: {"image_url": {"url": …}} or {"image_url": "…"}
        given = part.get("image_url")
        url = given.get("url") if isinstance(given, dict) else given
    elif kind == "input_image":  # the Responses API
        url = part.get("image_url")
    elif kind == "image":  # Anthropic: {"source": {"type": "base64", "data": …}}
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            return str(source["data"])
        raise BadRequest("image source must be base64 (the simulator fetches nothing)", "messages")
    else:
        return None
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        raise BadRequest("image_url must be a base64 data: URL (the simulator fetches nothing)", "image_url")
    return url.partition(",")[2]


def image_sizes(body: Json) -> list[tuple[int, int]]:
    """(width, height) of each image in the request, read from its header."""
    sizes = []
    for part in _parts(body):
        data = _base64(part)
        if data is None:
            continue
        try:
            with Image.open(io.BytesIO(base64.b64decode(data, validate=True))) as image:
                width, height = image.size
        except (binascii.Error, UnidentifiedImageError, OSError, ValueError):
            raise BadRequest("an image that is not a PNG, JPEG, GIF or WebP the server can read", "image_url") from None
        if width * height > MAX_PIXELS:
            raise BadRequest(f"an image of {width} × {height} pixels is past {MAX_PIXELS:,}", "image_url")
        sizes.append((width, height))
    return sizes


def image_tokens(width: int, height: int, patch_px: int) -> int:
    return math.ceil(width / patch_px) * math.ceil(height / patch_px)


def image_words(sizes: list[tuple[int, int]], patch_px: int, seed: bytes) -> list[str]:
    """The images' tokens as prompt words: distinct per request (`seed`), so two requests' images share no
    cache."""
    tag = zlib.crc32(seed)
    return [f"img{tag}.{i}.{k}" for i, (w, h) in enumerate(sizes) for k in range(image_tokens(w, h, patch_px))]


def encoder_seconds(sizes: list[tuple[int, int]], patch_px: int, params_b: float, flops: float) -> float:
    """The vision encoder's time over the images: 2 × parameters × patches (four a token) at `ENCODER_MFU`."""
    patches = sum(4 * image_tokens(w, h, patch_px) for w, h in sizes)
    return 2 * params_b * 1e9 * patches / (flops * ENCODER_MFU)
