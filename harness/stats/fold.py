"""A phase's statistics as a fold over its records, one record at a time.

The same fold serves both ways a phase is summarised: with every record in hand (the default: each value kept,
percentiles exact), or record by record as a long run goes (`PhaseKeep`, past the run's `records_in_memory`):
then each metric's values go into a histogram (`harness.stats.sketch`, within 0.1%) and the record is let go.
Counts, sums, rates, means, min and max are exact either way. Pure.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from harness.clock import NS_PER_S
from harness.config.metric_registry import Latency
from harness.records import RequestRecord
from harness.stats.metrics import PER_RECORD, duration_ns, itl_array_ns, ttft_ns
from harness.stats.schema import (
    Latencies,
    SessionStats,
    StatusLatencies,
    Throughput,
    Tokens,
)
from harness.stats.sketch import Samples

# The three ways a request can end, for latencies split by status: an errored request's TTFT and
# duration say how long a user waited for the failure; a cancelled one was cut off by the run's stop.
STATUS_GROUP = {"ok": "ok", "cancelled": "cancelled",
                **{s: "errored" for s in ("truncated", "overrun", "http_error", "timeout", "transport_error",
                                          "bad_stream")}}
# A group's per-record samples: the registry's latencies of one value a record (the schedule lag is the
# phase's, of every record: not split by status) and the duration of each.
_PER_RECORD: dict[str, Callable[[RequestRecord], float | None]] = {
    **{k: f for k, f in PER_RECORD.items() if k is not Latency.SCHEDULE_LAG}, "duration": duration_ns}
SLOW_CONNECT_MS = 1000.0  # Linux's first SYN retransmission: a connect this slow lost a SYN
EVERYTHING = (-(2**63), 2**63 - 1)  # a window that holds a record already known to lie inside the real one


@dataclass(frozen=True, slots=True)
class Interval:
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        return max(self.end_ns - self.start_ns, 1) / NS_PER_S

    def holds(self, t_ns: int | None) -> bool:
        return t_ns is not None and self.start_ns <= t_ns <= self.end_ns

    def to_json(self) -> dict[str, int | float]:
        return {"start_ns": self.start_ns, "end_ns": self.end_ns, "duration_s": self.duration_s}


@dataclass
class Group:
    """The requests of one status group: their latencies, durations and tokens."""

    count: int = 0
    output_tokens: int = 0
    values: dict[str, Samples] = field(default_factory=lambda: {k: Samples() for k in (
        *_PER_RECORD, Latency.ITL, Latency.CHUNK_GAP)})

    def add(self, rec: RequestRecord) -> None:
        self.count += 1
        self.output_tokens += rec.delivered_tokens
        for name, metric in _PER_RECORD.items():
            value = metric(rec)
            if value is not None:
                self.values[name].add(float(value))
        self.values[Latency.ITL].extend(itl_array_ns(rec))
        if len(rec.chunk_ns) > 1:
            self.values[Latency.CHUNK_GAP].extend(np.diff(np.asarray(rec.chunk_ns, dtype=np.float64)))

    def latencies(self) -> Latencies:
        return Latencies(**{name: self.values[name].distribution() for name in Latencies.model_fields})

    def with_status(self, latencies: Latencies) -> StatusLatencies:
        return StatusLatencies(count=self.count, output_tokens=self.output_tokens,
                               duration=self.values["duration"].distribution(), **dict(latencies))


@dataclass
class Span:
    """Count, first and last of some instants: enough for `span_rate`."""

    n: int = 0
    first: int | None = None
    last: int | None = None

    def add(self, t: int) -> None:
        self.n += 1
        self.first = t if self.first is None else min(self.first, t)
        self.last = t if self.last is None else max(self.last, t)

    def rate(self) -> float | None:
        if self.n < 2 or self.first is None or self.last is None or self.last <= self.first:
            return None
        return (self.n - 1) / ((self.last - self.first) / NS_PER_S)


@dataclass
class Flow:
    """Tokens and requests that arrived inside a window (a request straddling an edge counts what it streamed
    inside; its prompt counts when its first token does, or its end for an answer that generates none)."""

    out: float = 0.0
    inp: int = 0
    done: int = 0
    inputs: int = 0  # texts the requests that ended inside carried

    def add(self, r: RequestRecord, start: int, end: int) -> None:
        if r.chunk_ns:
            first, last = bisect_left(r.chunk_ns, start), bisect_right(r.chunk_ns, end)
            self.out += sum(r.chunk_tokens[first:last]) if r.exact_chunk_tokens else last - first
        elif r.answered_whole and start <= r.end_ns <= end:  # its tokens arrived at once, at its end
            self.out += r.delivered_tokens
        if (taken := r.prompt_taken_ns) is not None and start <= taken <= end:
            self.inp += prompt(r)
        ended = start <= r.end_ns <= end
        self.done += ended
        self.inputs += r.inputs if ended else 0

    def per_second(self, window: Interval) -> Throughput:
        d = window.duration_s
        return Throughput(output_tokens_per_s=self.out / d, total_tokens_per_s=(self.out + self.inp) / d,
                          requests_per_s=self.done / d, inputs_per_s=self.inputs / d)


def prompt(r: RequestRecord) -> int:
    return r.prompt_tokens if r.prompt_tokens is not None else r.prompt_tokens_requested


@dataclass
class Prompts:
    """How the server's count of each ok prompt compared with the length asked, and how much it had cached."""

    output: int = 0
    input: int = 0
    estimated: int = 0
    mismatched: int = 0
    reported: int = 0
    diff_mismatched: int = 0
    diff_sum: int = 0
    diff_max_abs: int = 0
    cached_reported: int = 0
    cached_prompt: int = 0
    cached_hit: int = 0
    reasoning_reported: int = 0
    reasoning: int = 0
    reasoning_output: int = 0
    images: int = 0
    image_bytes: int = 0
    images_counted: int = 0  # of them, on requests whose prompt the server counted …
    image_tokens: int = 0  # … and its count beyond the text asked, over those

    def add(self, r: RequestRecord) -> None:
        self.output += r.delivered_tokens
        self.input += prompt(r)
        self.estimated += r.tokens_estimated
        self.mismatched += r.token_mismatch
        self.images += r.images
        self.image_bytes += r.image_bytes
        if r.prompt_tokens is not None and r.images:  # the text's tokens and the images': what the images cost
            self.images_counted += r.images
            self.image_tokens += r.prompt_tokens - r.prompt_tokens_requested
        elif r.prompt_tokens is not None:
            diff = r.prompt_tokens - r.prompt_tokens_requested
            self.reported += 1
            self.diff_mismatched += diff != 0
            self.diff_sum += diff
            self.diff_max_abs = max(self.diff_max_abs, abs(diff))
        if r.cached_tokens is not None:
            self.cached_reported += 1
            self.cached_prompt += prompt(r)
            self.cached_hit += r.cached_tokens
        if r.reasoning_tokens:
            self.reasoning_reported += 1
            self.reasoning += r.reasoning_tokens
            self.reasoning_output += r.output_tokens

    def tokens(self) -> Tokens:
        n = self.reported
        return Tokens(output=self.output, input=self.input, estimated=self.estimated, mismatched=self.mismatched,
                      prompt_reported=n, prompt_mismatched=self.diff_mismatched,
                      prompt_diff_mean=self.diff_sum / n if n else None, prompt_diff_max_abs=self.diff_max_abs if n
                      else None, cached_reported=self.cached_reported, prompt_cached=self.cached_hit,
                      cached_share=self.cached_hit / self.cached_prompt if self.cached_prompt else None,
                      reasoning_reported=self.reasoning_reported, reasoning=self.reasoning, images=self.images,
                      image_bytes=self.image_bytes,
                      image_tokens=self.image_tokens / self.images_counted if self.images_counted else None,
                      reasoning_output=self.reasoning_output)


@dataclass
class Turns:
    """Multi-turn sessions: conversations, and TTFT and prompt length by turn (later turns carry history)."""

    conversations: set[str | None] = field(default_factory=set)
    count: Counter[int] = field(default_factory=Counter)
    prompt: Counter[int] = field(default_factory=Counter)
    ttft: dict[int, Samples] = field(default_factory=dict)

    def add(self, r: RequestRecord) -> None:
        turn = r.turn or 0
        self.conversations.add(r.session)
        self.count[turn] += 1
        self.prompt[turn] += r.prompt_tokens_requested
        values = self.ttft.setdefault(turn, Samples())
        if r.status == "ok" and (v := ttft_ns(r)) is not None:
            values.add(float(v))

    def stats(self) -> SessionStats | None:
        if not self.count:
            return None
        turns = sorted(self.count)
        return SessionStats(conversations=len(self.conversations), turns=sum(self.count.values()),
                            turns_per_conversation_max=turns[-1] + 1,
                            ttft_by_turn_ms={str(k): self.ttft[k].distribution() for k in turns},
                            prompt_tokens_by_turn_mean={str(k): self.prompt[k] / self.count[k] for k in turns})
