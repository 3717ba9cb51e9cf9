"""What the chunks of one streamed response tell about its request, whichever HTTP client read them."""

from __future__ import annotations

from collections.abc import Callable

from harness.records import RequestRecord
from harness.sse import SSEDecoder, interpret


class StreamAccumulator:
    """Feeds SSE bytes, stamped with their arrival time, into a request's record.

    `feed` returns True once the stream is over for the harness: `[DONE]`, or an error object
    in the stream. Raises `BadChunk` for a payload that is not an OpenAI stream chunk.
    """

    __slots__ = ("_counted", "_decoder", "_on_first_token", "done", "rec")

    def __init__(self, rec: RequestRecord, on_first_token: Callable[[], None] | None = None) -> None:
        self.rec = rec
        self.done = False
        self._decoder = SSEDecoder()
        self._counted = 0  # completion tokens reported so far (continuous usage)
        self._on_first_token = on_first_token

    def feed(self, t_ns: int, data: bytes) -> bool:
        rec = self.rec
        for payload in self._decoder.feed(data):
            chunk = interpret(payload)
            if chunk.done:
                if not rec.chunk_ns:
                    rec.status, rec.reason = "bad_stream", "no token in stream"
                self.done = True
                return True
            if chunk.error is not None:
                rec.status, rec.reason = "http_error", f"error in stream: {chunk.error[:120]}"
                self.done = True
                return True
            if chunk.carries_token:
                if rec.first_token_ns is None:
                    rec.first_token_ns = t_ns
                    if self._on_first_token is not None:
                        self._on_first_token()
                if chunk.has_content and rec.first_content_ns is None:
                    rec.first_content_ns = t_ns
                rec.chunk_ns.append(t_ns)
                if chunk.completion_tokens is not None:
                    rec.chunk_tokens.append(chunk.completion_tokens - self._counted)
            if chunk.completion_tokens is not None:
                self._counted = chunk.completion_tokens
                rec.completion_tokens = chunk.completion_tokens
                rec.prompt_tokens = chunk.prompt_tokens
        return False

    def ended(self) -> None:
        """The body ended: without `[DONE]`, the stream was cut short."""
        if not self.done:
            self.rec.status, self.rec.reason = "bad_stream", "stream ended before [DONE]"
            self.done = True
