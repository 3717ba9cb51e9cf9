"""The live progress line: what the run has done so far, rewritten in place once a second."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TextIO

import numpy as np

from harness.clock import NS_PER_MS, NS_PER_S, Clock, cancel_quietly
from harness.records import RequestRecord
from harness.stats.metrics import ttft_ns


class Progress:
    """Fed every finished record; shows elapsed, sent/completed, req/s, tokens/s, p50 TTFT, errors."""

    def __init__(self, clock: Clock, out: TextIO, sent: Callable[[], int]) -> None:
        self.clock = clock
        self.out = out
        self.sent = sent
        self.phase = ""
        self._start = clock.now_ns()
        self._done = 0
        self._errors = 0
        self._tokens = 0
        self._ttft_ns: deque[int] = deque(maxlen=2000)  # the recent ones: "so far" stays current
        self._task: asyncio.Task[None] | None = None

    def begin_phase(self, name: str) -> None:
        self.phase = name
        self._start = self.clock.now_ns()
        self._done = self._errors = self._tokens = 0
        self._ttft_ns.clear()

    def record(self, rec: RequestRecord) -> None:
        self._done += 1
        if rec.status != "ok":
            self._errors += 1
            return
        self._tokens += rec.delivered_tokens
        ttft = ttft_ns(rec)
        if ttft is not None:
            self._ttft_ns.append(ttft)

    def line(self) -> str:
        elapsed = max(self.clock.now_ns() - self._start, 1) / NS_PER_S
        ttft = f"{np.median(self._ttft_ns) / NS_PER_MS:,.1f} ms" if self._ttft_ns else "-"
        return (f"[{self.phase}] {elapsed:6.1f} s  sent {self.sent():,}  done {self._done:,}  "
                f"{self._done / elapsed:,.1f} req/s  {self._tokens / elapsed:,.0f} tok/s  TTFT p50 {ttft}  "
                f"errors {self._errors:,}")

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_quietly(self._task)
            self.out.write("\r\x1b[2K")  # leave the terminal as it was
            self.out.flush()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.out.write("\r\x1b[2K" + self.line())
            self.out.flush()
