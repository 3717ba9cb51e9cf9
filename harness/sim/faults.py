"""Fault injection: seeded, per request, changeable while the simulator runs.

Each request draws its fate once, from a generator seeded by the configuration's seed, in the
order requests arrive: an injected error response, a stall before token k, a disconnect after
token k, or a malformed chunk in place of token k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
