"""Fault injection: seeded, per request, changeable while the simulator runs.

Each request draws its fate once, from a generator seeded by the configuration's seed, in the
order requests arrive: an injected error response, a stall before token k, a disconnect after
token k, or a malformed chunk in place of token k.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

ERROR_TYPES = {400: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}


@dataclass(frozen=True, slots=True)
class FaultConfig:
    error_rate: float = 0.0
    error_status: int = 500
    stall_rate: float = 0.0
    stall_ms: float = 1000.0
    disconnect_rate: float = 0.0
    malformed_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("error_rate", "stall_rate", "disconnect_rate", "malformed_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.error_status not in ERROR_TYPES:
            raise ValueError(f"error_status must be one of {sorted(ERROR_TYPES)}")
        if self.stall_ms < 0:
            raise ValueError("stall_ms must be >= 0")

    @classmethod
    def from_json(cls, data: object, base: FaultConfig) -> FaultConfig:
        """`base` updated with the fields of a JSON object; unknown fields are an error."""
        if not isinstance(data, dict):
            raise ValueError("fault configuration must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault field {sorted(unknown)[0]!r}")
        return cls(**{**asdict(base), **data})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
