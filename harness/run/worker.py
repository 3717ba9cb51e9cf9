"""The worker: one request through a backend, its events stamped with the one clock into one record.

Every timestamp of a record is taken here, and the record is closed here, whichever backend ran it
(the lean HTTP/1.1 client, aiohttp, a fake or the virtual-time engine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from harness.client.backend import Backend
from harness.client.chunk import Chunk
from harness.clock import Clock
from harness.records import RequestRecord, Status, compact
from harness.workload.requests import RequestSpec


class RecordStamper:
    """The `RequestEvents` a backend reports to: each event stamped with `clock` into `rec`."""

    __slots__ = ("_cap", "_connecting", "_counted", "_now", "_wrote", "answer", "done", "got_token", "keep_text",
                 "rec")

    def __init__(self, rec: RequestRecord, clock: Clock, answer: list[str] | None = None,
                 wrote: Callable[[], None] | None = None) -> None:
        """`wrote`: called once, as the request is first handed to the connection (a retry is the same
        request)."""
        self.rec = rec
        self._wrote = wrote
        self.answer = answer  # the answer's text pieces, when a session needs them for its next turn
        self.keep_text = answer is not None
        self._now = clock.now_ns
        self.done = False  # the stream is over for the harness: [DONE], an error, or its end
        self.got_token = False
        self._counted = 0  # completion tokens reported so far (continuous usage)
        self._connecting = 0
        self._cap = overrun_cap(rec.max_tokens)

    def connecting(self) -> None:
        self._connecting = self._now()

    def media(self, content_type: str) -> None:
        self.rec.content_type = content_type[:80]

    def sent(self) -> None:
        if self._wrote is not None and self.rec.sent_ns is None:
            self._wrote()
        self.rec.sent_ns = now = self._now()
        if self._connecting:
            self.rec.connect_ms = (now - self._connecting) / 1e6
            self._connecting = 0

    def status(self, http_status: int) -> None:
        self.rec.http_status = http_status

    def retried(self) -> None:
        self.rec.retries += 1

    def failed(self, status: Status, reason: str, message: str = "") -> None:
        self.rec.status, self.rec.reason, self.rec.message = status, reason, message
        self.done = True

    def ended(self, end: str = "[DONE]") -> None:
        if not self.done:
            self.failed("bad_stream", f"stream ended before {end}")

    def token(self) -> bool:
        t_ns = self._now()
        rec = self.rec
        if rec.first_content_ns is None:  # never set once a plain token came: one check a token, not two
            rec.first_content_ns = t_ns
            if not self.got_token:
                self.got_token = True
                rec.first_token_ns = t_ns
        rec.chunk_ns.append(t_ns)
        return len(rec.chunk_ns) > self._cap and self._overrun()

    def _overrun(self) -> bool:
        """A server that ignores max_tokens: the stream is cut here, not at the request timeout."""
        self.failed("overrun", f"over {self._cap} tokens for max_tokens {self.rec.max_tokens}: the stream was cut")
        return True

    def chunks(self, chunks: Sequence[Chunk]) -> bool:
        if self.done or not chunks:
            return self.done  # nothing new, or what follows the end, which is not the stream's
        t_ns = self._now()  # every chunk of one read arrived together
        rec = self.rec
        for chunk in chunks:
            plain = chunk.plain  # nearly every chunk: one token, nothing else to read
            if not plain and (chunk.done or chunk.error is not None or chunk.whole):
                return self._whole(chunk, t_ns) if chunk.whole else self._end(chunk)
            if plain or chunk.has_content or chunk.has_reasoning:
                if not self.got_token:
                    self.got_token = True
                    rec.first_token_ns = t_ns
                if chunk.has_content:
                    if rec.first_content_ns is None:
                        rec.first_content_ns = t_ns
                elif chunk.has_reasoning:  # thinking alone (usage's count, when it comes, replaces this one)
                    rec.reasoning_tokens = (rec.reasoning_tokens or 0) + 1
                rec.chunk_ns.append(t_ns)
            if not plain:
                self._details(chunk)
        return len(rec.chunk_ns) > self._cap and self._overrun()


    def _end(self, chunk: Chunk) -> bool:
        """[DONE] or an error in the stream: the stream is over for the harness."""
        rec = self.rec
        if chunk.error is not None:
            self.failed("http_error", "error in stream", chunk.error)
            return True
        self._details(chunk)  # an API whose last event carries the usage (the Responses API's)
        if not rec.chunk_ns:
            self.failed("bad_stream", "no token in stream")
        self.done = True
        return True

    def _whole(self, chunk: Chunk, t_ns: int) -> bool:
        """An answer that came whole (embeddings, `stream: false`): nothing streamed, so no token time; its
        arrival is its E2E. Embeddings asked for no tokens, whatever the workload's output length
        (`max_tokens` 0 says so)."""
        rec = self.rec
        rec.last_token_ns = t_ns
        self._details(chunk)
        if chunk.inputs is not None:
            rec.max_tokens = 0
            if chunk.inputs != rec.inputs:
                self.failed("bad_stream", f"{chunk.inputs} results for the {rec.inputs} inputs sent")
        self.done = True
        return True

    def _details(self, chunk: Chunk) -> None:
        """What a parsed chunk says besides its token: text kept for a session, usage, finish, cache."""
        rec = self.rec
        if chunk.has_content or chunk.has_reasoning:
            if self.answer is not None and chunk.text:
                self.answer.append(chunk.text)
            if chunk.completion_tokens is not None:
                rec.chunk_tokens.append(chunk.completion_tokens - self._counted)
        if chunk.completion_tokens is not None:
            self._counted = chunk.completion_tokens
            rec.completion_tokens = chunk.completion_tokens
        if chunk.prompt_tokens is not None:  # with the output's count, or alone at the start (Anthropic's)
            rec.prompt_tokens = chunk.prompt_tokens
        if chunk.reasoning_tokens:  # 0 from a server that streamed thinking anyway: the chunks' count stands
            rec.reasoning_tokens = chunk.reasoning_tokens
        if chunk.finish_reason is not None:
            rec.finish_reason = chunk.finish_reason
        if chunk.cached_tokens is not None:
            rec.cached_tokens = chunk.cached_tokens
        if chunk.server_prompt_ms is not None:
            rec.server_prompt_ms, rec.server_decode_ms = chunk.server_prompt_ms, chunk.server_decode_ms


async def run_request(backend: Backend, clock: Clock, spec: RequestSpec, intended_ns: int,
                      sink: Callable[[RequestRecord], None], answer: list[str] | None = None,
                      held_ns: int = 0, wrote: Callable[[], None] | None = None) -> RequestRecord:
    """Send one request; its closed record goes to `sink` however it ends (a cancelled one as `cancelled`).
    With `answer`, the answer's text is appended to it as it arrives; `held_ns`, how long an in-flight cap
    held it; `wrote`, called as its bytes are handed to the connection."""
    rec = RequestRecord(spec.request_id, spec.phase, spec.index, spec.prompt_tokens, spec.max_tokens, intended_ns,
                        batch=spec.batch, session=spec.session, turn=spec.turn, held_ns=held_ns, inputs=spec.inputs,
                        images=len(spec.images), image_bytes=spec.image_bytes)
    events = RecordStamper(rec, clock, answer, wrote)
    try:
        await backend.execute(spec, events)
    except asyncio.CancelledError:
        rec.status, rec.reason = "cancelled", "run stopped"
        raise
    except Exception as exc:  # a backend bug must not pass for a good answer, nor stop the run
        events.failed("bad_stream", f"client error reading the stream: {type(exc).__name__}")
    finally:
        close(rec, clock.now_ns())
        _check_length(rec, spec.ignore_eos)
        sink(rec)
    return rec


def _check_length(rec: RequestRecord, exact: bool) -> None:
    """Fewer tokens than `max_tokens` is not a success when exactly that many were asked for (ignore_eos,
    min_tokens), nor when the server stopped for length before it (the context was full)."""
    # Per chunk when the server said; else its usage total (a server may put several tokens in one chunk).
    delivered = rec.delivered_tokens if rec.exact_chunk_tokens else rec.output_tokens
    if rec.status == "ok" and max(delivered, len(rec.chunk_ns)) > rec.max_tokens:
        rec.status, rec.reason = "overrun", f"{max(delivered, len(rec.chunk_ns))} of {rec.max_tokens} tokens: " \
                                            "the server ignored max_tokens"
        return
    if rec.status != "ok" or delivered >= rec.max_tokens:
        return
    if exact:
        rec.status, rec.reason = "truncated", f"{delivered} of {rec.max_tokens} tokens"
    elif rec.finish_reason == "length":
        rec.status, rec.reason = "truncated", f"context full: {delivered} of {rec.max_tokens} tokens"


OVERRUN_SLACK = 16


def overrun_cap(max_tokens: int) -> int:
    """Token-bearing chunks read before a stream that ignores max_tokens is cut: 4 × max_tokens + 16 (room for
    a server that splits a token over chunks now and then, and no more)."""
    return 4 * max_tokens + OVERRUN_SLACK


def close(rec: RequestRecord, end_ns: int) -> None:
    rec.end_ns = end_ns
    if rec.chunk_ns:
        rec.last_token_ns = rec.chunk_ns[-1]
    compact(rec)
