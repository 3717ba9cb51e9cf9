"""A scripted backend on a clock of its own (usually the fake one): the seam's fake, for tests in virtual
time.

It reports the same events a real backend does, in the same order, so the worker and everything after
it cannot tell the difference; the backend contract tests hold it to the HTTP clients' behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.client.backend import RequestEvents
from harness.client.chunk import Chunk
from harness.clock import NS_PER_MS, FakeClock
from harness.records import Status
from harness.workload.requests import RequestSpec

_TOKEN = (Chunk(has_content=True, text=" w"),)
_DONE = (Chunk(done=True),)


@dataclass(frozen=True, slots=True)
class Script:
    """How the scripted server answers one request."""

    tokens: int | None = None  # default: the request's max_tokens
    usage: bool = True  # a usage chunk before [DONE]
    http_status: int = 200  # otherwise an OpenAI error of `error_type`, after the first-token delay
    error_type: str = "server_error"
    error_message: str = ""  # the server's own sentence
    finish_reason: str | None = "length"  # on the last token's chunk
    cut_after: int | None = None  # the connection drops after this many tokens
    no_done: bool = False  # the body ends without [DONE]
    stream_error: str | None = None  # an error object in the stream after the tokens


class ScriptedBackend:
    """Answers every request after `ttft_ms`, then one token every `itl_ms`, in the clock's time.

    `scripts` maps a request index to its `Script`; `fail` maps one to a (status, reason) the request ends
    with after `ttft_ms`, for tests that only need a failure.
    """

    def __init__(self, clock: FakeClock, ttft_ms: float = 50, itl_ms: float = 10,
                 fail: dict[int, tuple[Status, str]] | None = None, scripts: dict[int, Script] | None = None) -> None:
        self.clock = clock
        self.ttft_ns = int(ttft_ms * NS_PER_MS)
        self.itl_ns = int(itl_ms * NS_PER_MS)
        self.fail = fail or {}
        self.scripts = scripts or {}
        self.prepared: list[str] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    def prepare(self, spec: RequestSpec) -> None:
        self.prepared.append(spec.request_id)

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        events.sent()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await self.clock.sleep(self.ttft_ns)
            if spec.index in self.fail:
                events.failed(*self.fail[spec.index])
                return
            await self._answer(spec, self.scripts.get(spec.index, Script()), events)
        finally:
            self.in_flight -= 1

    async def _answer(self, spec: RequestSpec, script: Script, events: RequestEvents) -> None:
        events.status(script.http_status)
        if script.http_status != 200:
            events.failed("http_error", f"HTTP {script.http_status} {script.error_type}", script.error_message)
            return
        tokens = spec.max_tokens if script.tokens is None else script.tokens
        for i in range(tokens):
            if i:
                await self.clock.sleep(self.itl_ns)
            if script.cut_after is not None and i == script.cut_after:
                events.failed("transport_error", "ConnectionResetError")
                return
            events.chunks(_TOKEN)
        if script.finish_reason is not None:
            events.chunks((Chunk(finish_reason=script.finish_reason),))
        if script.stream_error is not None:
            events.chunks((Chunk(error=script.stream_error),))
            return
        if script.usage:
            events.chunks((Chunk(prompt_tokens=spec.prompt_tokens, completion_tokens=tokens),))
        if script.no_done:
            events.ended()
        else:
            events.chunks(_DONE)
