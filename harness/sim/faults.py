"""Fault injection: seeded, per request, changeable while the simulator runs.

Each request draws its fate once, from a generator seeded by the configuration's seed, in the
order requests arrive: an injected error response, a stall before token k, a disconnect after
token k, or a malformed chunk in place of token k.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from aiohttp import web

from harness.config.simulator import FaultConfig


@dataclass(frozen=True, slots=True)
class FaultPlan:
    error_status: int | None = None
    stall_before: int | None = None  # token index
    disconnect_after: int | None = None
    malformed_at: int | None = None

    @property
    def clean(self) -> bool:
        return self == _CLEAN


_CLEAN = FaultPlan()


class FaultInjector:
    def __init__(self, config: FaultConfig) -> None:
        self.configure(config)

    def configure(self, config: FaultConfig) -> None:
        self.config = config
        self._rng = np.random.default_rng(config.seed)

    def plan(self, output_tokens: int) -> FaultPlan:
        c = self.config
        if not (c.error_rate or c.stall_rate or c.disconnect_rate or c.malformed_rate):
            return _CLEAN
        draws = self._rng.random(4)
        positions = self._rng.integers(0, max(output_tokens, 1), size=3)
        if draws[0] < c.error_rate:
            return FaultPlan(error_status=c.error_status)
        return FaultPlan(
            stall_before=int(positions[0]) if draws[1] < c.stall_rate else None,
            disconnect_after=int(positions[1]) if draws[2] < c.disconnect_rate else None,
            malformed_at=int(positions[2]) if draws[3] < c.malformed_rate else None,
        )


MALFORMED_FRAME = b"data: {this is not json\n\n"
Frame = Callable[..., bytes]  # a renderer's tokens(i, n, finish=…)


async def emit_faulty(request: web.Request, resp: web.StreamResponse, frame: Frame, plan: FaultPlan,
                      stall_ms: float, first: int, count: int, finish: str | None) -> None:
    """Tokens `first`… of a stream one frame each, with the request's drawn faults where the plan puts them: a
    stall before one, a malformed frame in place of one, the connection dropped after one."""
    for i in range(first, first + count):
        if i == plan.stall_before:
            await asyncio.sleep(stall_ms / 1e3)
        out = frame(i, 1, finish=finish if i == first + count - 1 else None)
        await resp.write(MALFORMED_FRAME if i == plan.malformed_at else out)
        if i == plan.disconnect_after:
            if request.transport is not None:
                request.transport.close()
            raise ConnectionResetError("injected disconnect")
