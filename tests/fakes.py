"""Fakes for the seams: a scripted backend on the virtual clock."""

from __future__ import annotations

from harness.clock import NS_PER_MS, FakeClock
from harness.records import RequestRecord
from harness.workload import RequestSpec


class ScriptedBackend:
    """Answers every request after `ttft_ms`, then one token every `itl_ms`, in virtual time.

    `fail` maps a request index to (status, reason) for requests that should fail.
    """

    def __init__(self, clock: FakeClock, ttft_ms: float = 50, itl_ms: float = 10,
                 fail: dict[int, tuple[str, str]] | None = None) -> None:
        self.clock = clock
        self.ttft_ns = int(ttft_ms * NS_PER_MS)
        self.itl_ns = int(itl_ms * NS_PER_MS)
        self.fail = fail or {}
        self.prepared: list[str] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    def prepare(self, spec: RequestSpec) -> None:
        self.prepared.append(spec.request_id)

    async def execute(self, spec: RequestSpec, rec: RequestRecord) -> None:
        rec.sent_ns = self.clock.now_ns()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            if spec.index in self.fail:
                await self.clock.sleep(self.ttft_ns)
                rec.status, rec.reason = self.fail[spec.index]  # type: ignore[assignment]
                return
            await self.clock.sleep(self.ttft_ns)
            for i in range(spec.max_tokens):
                if i:
                    await self.clock.sleep(self.itl_ns)
                rec.chunk_ns.append(self.clock.now_ns())
            rec.first_token_ns = rec.first_content_ns = rec.chunk_ns[0]
            rec.last_token_ns = rec.chunk_ns[-1]
            rec.completion_tokens = spec.max_tokens
        finally:
            self.in_flight -= 1
            rec.end_ns = self.clock.now_ns()
