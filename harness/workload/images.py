"""Synthetic images for prompts: seeded, each request's its own (a server's image cache never matches one from
another request), encoded as a user uploads them — PNG or JPEG, base64 in a data URL.

Blocks of 8 × 8 pixels of seeded colours: smooth enough that the format's compression works as on a photo (a
JPEG a tenth of the raw pixels), varied enough that no two requests' images are alike."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image

from harness.config.workload import Images

MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg"}
BLOCK = 8


def image_bytes(width: int, height: int, fmt: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(-(-height // BLOCK), -(-width // BLOCK), 3), dtype=np.uint8)
    pixels = np.repeat(np.repeat(blocks, BLOCK, axis=0), BLOCK, axis=1)[:height, :width]
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format=fmt.upper(), **({"quality": 85} if fmt == "jpeg" else
                                                                      {"compress_level": 1}))
    return out.getvalue()


def data_urls(images: Images, seed: int) -> tuple[str, ...]:
    """A request's images as `data:` URLs, the j-th seeded by (`seed`, j)."""
    media = MEDIA_TYPES[images.format]
    return tuple(f"data:{media};base64," + base64.b64encode(
        image_bytes(images.width, images.height, images.format, seed * 1_000_003 + j)).decode()
        for j in range(images.count))
