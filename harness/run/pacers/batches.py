"""Training-style fixed batches: a batch sent at once, the next when every request of it has ended."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from harness.run.pacers import Sender
from harness.workload.requests import RequestSpec

Barrier = Callable[[int], Coroutine[Any, Any, None]]  # before batch k ≥ 1 of a fixed-batch phase


async def pace(sender: Sender, batches: Sequence[Sequence[RequestSpec]], barrier: Barrier | None) -> None:
    """Each batch at once, intended all at the same instant; `barrier` awaited before batch k ≥ 1 (a sharded
    run's: every shard's share of batch k − 1 has ended)."""
    for k, batch in enumerate(batches):
        if k and barrier is not None:
            await barrier(k)
        for spec in batch:
            sender.backend.prepare(spec)
        intended = sender.clock.now_ns()
        tasks = {sender.launch(spec, intended) for spec in batch}
        if tasks:  # a shard's share of a small batch may be empty; it keeps the barrier all the same
            await asyncio.wait(tasks)  # not gather: stopping the sender must not cancel the batch
