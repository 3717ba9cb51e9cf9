"""The event loop every process of the harness runs on: uvloop where it installs (Linux, macOS).

A streamed token costs the client one socket read when servers write each event on its own (vLLM, llama.cpp,
TGI) and the client keeps up: an empty read costs ~7 µs on uvloop and ~40 µs on asyncio's own selector loop
here (bench/read_floor.py); at 256 streams that took a fifth off the harness's CPU per token and halved its
timing error (docs/benchmarks.md). `HARNESS_EVENT_LOOP=asyncio` picks asyncio's loop, to rule uvloop out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    if os.environ.get("HARNESS_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:  # Windows: no uvloop
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)
