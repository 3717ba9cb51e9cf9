"""Load shapes as pacers (issue 65): each module paces one shape of load through a `Sender` — when each request
leaves, and what it waits for — and nothing else. The dispatcher (`harness.run.dispatch`) owns a phase's
lifecycle: the requests in flight, stopping, the grace period, the records.

    arrivals       open loop: each request at its absolute offset (Poisson, gamma, constant, ramp, trace), an
                   optional cap on requests in flight held as schedule lag, never silently
    batches        training-style: a batch sent at once, the next when all of it has ended
    users          closed loop: N users, each sending its next request when its last one ends
    conversations  sessions: conversations arriving open loop, each turn after the last answer and a think time
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from harness.client.backend import Backend
from harness.clock import Clock
from harness.records import RequestRecord
from harness.workload.requests import RequestSpec


class Sender(Protocol):
    """What a pacer sends through: the phase's clock and backend, and a launch that hands a request over now."""

    clock: Clock
    backend: Backend

    @property
    def in_flight(self) -> set[asyncio.Task[RequestRecord]]: ...

    def launch(self, spec: RequestSpec, intended_ns: int, answer: list[str] | None = None, held_ns: int = 0
               ) -> asyncio.Task[RequestRecord]: ...
