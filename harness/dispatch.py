"""The dispatcher: when each request is sent.

Open loop sleeps to absolute deadlines (start + intended offset), never "a gap after the last
send", which drifts and under-delivers the rate. Fixed batch sends B at once and waits for all.
Closed loop starts a user's next request when its last one ends. Every record carries
`intended` and `sent`, so any lateness is visible as schedule lag.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from harness.client import Backend
from harness.clock import Clock
from harness.records import RequestRecord
from harness.workload import RequestSpec

Sink = Callable[[RequestRecord], None]


class Dispatcher:
    def __init__(self, backend: Backend, clock: Clock, sink: Sink) -> None:
        self.backend = backend
        self.clock = clock
        self.sink = sink

    async def _one(self, spec: RequestSpec, intended_ns: int) -> RequestRecord:
        rec = RequestRecord(spec.request_id, spec.phase, spec.index, spec.prompt_tokens, spec.max_tokens,
                            intended_ns, batch=spec.batch)
        try:
            await self.backend.execute(spec, rec)
        except asyncio.CancelledError:
            rec.status, rec.reason, rec.end_ns = "cancelled", "run stopped", self.clock.now_ns()
            self.sink(rec)
            raise
        self.sink(rec)
        return rec

    async def open_loop(self, specs: Sequence[RequestSpec], offsets_ns: Sequence[int]) -> list[RequestRecord]:
        start = self.clock.now_ns()
        tasks: list[asyncio.Task[RequestRecord]] = []
        try:
            for spec, offset in zip(specs, offsets_ns, strict=True):
                deadline = start + int(offset)
                self.backend.prepare(spec)
                await self.clock.sleep_until(deadline)
                tasks.append(asyncio.create_task(self._one(spec, deadline)))
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            await _cancel_all(tasks)
            raise

    async def fixed_batch(self, batches: Sequence[Sequence[RequestSpec]]) -> list[RequestRecord]:
        records: list[RequestRecord] = []
        for batch in batches:
            for spec in batch:
                self.backend.prepare(spec)
            intended = self.clock.now_ns()
            tasks = [asyncio.create_task(self._one(spec, intended)) for spec in batch]
            try:
                records.extend(await asyncio.gather(*tasks))
            except asyncio.CancelledError:
                await _cancel_all(tasks)
                raise
        return records

    async def closed_loop(
        self, specs: Sequence[RequestSpec], concurrency: int, think_ns: int = 0
    ) -> list[RequestRecord]:
        queue = iter(specs)
        records: list[RequestRecord] = []

        async def user() -> None:
            for spec in queue:  # the shared iterator hands each spec to exactly one user
                self.backend.prepare(spec)
                records.append(await self._one(spec, self.clock.now_ns()))
                if think_ns:
                    await self.clock.sleep_until(self.clock.now_ns() + think_ns)

        tasks = [asyncio.create_task(user()) for _ in range(concurrency)]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            await _cancel_all(tasks)
            raise
        return sorted(records, key=lambda r: r.index)


async def _cancel_all(tasks: Sequence[asyncio.Task[object]] | Sequence[asyncio.Task[RequestRecord]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
