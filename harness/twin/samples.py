"""What a run's records say of the engine's steps, as rows for `harness sim fit`: every gap between two
streamed chunks of a request is one engine step; while it lasted, the other records say how many requests were
decoding, how many tokens of context they held and which prompts were being prefilled (a request's first token
ends its prefill's step, or the step before it). A prompt's whole step is seen where the server timed it
(llama.cpp's `timings.prompt_ms`) or where a request had the engine to itself.

Rows: [step ms, sequences, context tokens/1000, prompt tokens/1000, prompts prefilled].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.records import RequestRecord

MAX_SAMPLES = 200_000  # step gaps kept for the fit (a stride over more)


@dataclass(frozen=True)
class Streams:
    """The ok requests of a run as sorted arrays: when each decoded, what it held, what it prefilled."""

    sent: np.ndarray  # request sent, ns
    first: np.ndarray  # first token, ns
    last: np.ndarray  # last token, ns
    prompt: np.ndarray  # prompt tokens
    chunks: np.ndarray  # every token-bearing chunk of every request, sorted
    count: np.ndarray  # chunks per request

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> Streams:
        ok = [r for r in records if r.status == "ok" and len(r.chunk_ns) >= 2]
        prompt = [r.prompt_tokens or r.prompt_tokens_requested for r in ok]
        return cls(np.array([r.sent_ns or r.chunk_ns[0] for r in ok], dtype=np.int64),
                   np.array([r.chunk_ns[0] for r in ok], dtype=np.int64),
                   np.array([r.chunk_ns[-1] for r in ok], dtype=np.int64), np.array(prompt, dtype=np.float64),
                   np.sort(np.concatenate([np.asarray(r.chunk_ns, dtype=np.int64) for r in ok]
                                          or [np.zeros(0, dtype=np.int64)])),
                   np.array([len(r.chunk_ns) for r in ok], dtype=np.float64))

    def held(self, t: np.ndarray, since_sent: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """At each time: the requests decoding (`since_sent`: sent and not finished), and the tokens of
        context they hold (prompt + generated)."""
        start = self.sent if since_sent else self.first
        by_first, by_last = np.argsort(start), np.argsort(self.last)
        started = np.searchsorted(start[by_first], t, side="right")
        ended = np.searchsorted(self.last[by_last], t, side="right")
        prompt_started = np.concatenate([[0.0], np.cumsum(self.prompt[by_first])])[started]
        prompt_ended = np.concatenate([[0.0], np.cumsum(self.prompt[by_last])])[ended]
        generated = np.searchsorted(self.chunks, t, side="right") - np.concatenate(
            [[0.0], np.cumsum(self.count[by_last])])[ended]
        return (started - ended).astype(np.float64), prompt_started - prompt_ended + generated

    def prefilled(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The requests whose first token came in (start, end] — prefilled in that step — and their prompt
        tokens."""
        order = np.argsort(self.first)
        cum = np.concatenate([[0.0], np.cumsum(self.prompt[order])])
        firsts = self.first[order]
        hi, lo = np.searchsorted(firsts, end, side="right"), np.searchsorted(firsts, start, side="right")
        return (hi - lo).astype(np.float64), np.asarray(cum[hi] - cum[lo])


def step_samples(records: Sequence[RequestRecord], first_token_step: int = 0) -> np.ndarray:
    """One row per chunk gap: [gap ms, sequences, context/1000, prefill tokens/1000, prompts prefilled].

    A prefill's first token leaves with its step's other tokens but reaches the client a little before or
    after them, so each step owns the first tokens nearest its end: from half its own gap before the end to
    half the next gap after it. Consecutive steps of a stream thus share the timeline out without overlap (a
    long prefill step does not also claim the first tokens of the short steps after it). With
    `first_token_step` 1 (llama.cpp) a first token leaves one step after the step that processed its prompt:
    each step owns the first tokens around the end of the step after it — the window that step would own — so
    that a long prompt step and the short step before it never both claim one first token."""
    streams = Streams.of(records)
    parts = []
    for r in records:
        if r.status == "ok" and len(r.chunk_ns) >= 2:
            c = np.asarray(r.chunk_ns, dtype=np.int64)
            gaps = np.diff(c)
            after = np.append(gaps[1:], gaps[-1])  # the last step: as far after as its own half
            if first_token_step:  # the window the step after owns, so that the windows still tile the timeline
                then = c[1:] + after
                owned = (then - after // 2, then + np.append(after[1:], after[-1]) // 2)
            else:
                owned = (c[1:] - gaps // 2, c[1:] + after // 2)
            parts.append(np.column_stack([c[:-1], c[1:], *owned]))
    if not parts:
        return np.zeros((0, 5))
    rows = np.concatenate(parts)
    if len(rows) > MAX_SAMPLES:
        rows = rows[np.linspace(0, len(rows) - 1, MAX_SAMPLES).astype(np.int64)]
    start, end, owned_from, owned_to = rows.T
    seqs, context = streams.held((start + end) // 2)
    prefilling, prompts = streams.prefilled(owned_from, owned_to)  # sequences of the step too, as the engine counts
    gaps = np.column_stack([(end - start) / 1e6, seqs + prefilling, context / 1e3, prompts / 1e3, prefilling])
    return np.concatenate([gaps, lone_prompts(records, first_token_step)])


def overlapping(spans: Sequence[tuple[int, int]], windows: Sequence[tuple[int, int]]) -> np.ndarray:
    """For each window (begin, end), how many spans (start, stop) overlap it (start < end and stop > begin):
    the spans started before its end less those stopped by its begin — sorted once, O(n log n) for a long
    run."""
    starts = np.sort(np.array([s for s, _ in spans], dtype=np.int64))
    stops = np.sort(np.array([e for _, e in spans], dtype=np.int64))
    begin = np.array([b for b, _ in windows], dtype=np.int64)
    end = np.array([e for _, e in windows], dtype=np.int64)
    return np.searchsorted(starts, end, side="left") - np.searchsorted(stops, begin, side="right")


def lone_prompts(records: Sequence[RequestRecord], first_token_step: int = 0) -> np.ndarray:
    """A prompt's step seen whole, rows as `step_samples`'. Where the server timed its own prompt processing
    (llama.cpp's `timings.prompt_ms`: the step that held its prompt, the other streams' decode tokens in it),
    that time, one row a batch of prompts processed together and with no other prompt (`server_batches`);
    otherwise the TTFT of a request that had the engine to itself (no other request between its send and its
    last token), less the step its first token waited for (`first_token_step`, priced at its own median gap).
    At a low load most prompts are alone, and no other stream's gap shows their steps."""
    ok = [r for r in records if r.status == "ok" and r.sent_ns is not None and len(r.chunk_ns) >= 3]
    untimed = [r for r in ok if r.server_prompt_ms is None]
    meanwhile = overlapping([(r.sent_ns or 0, r.chunk_ns[-1]) for r in ok],
                             [(r.sent_ns or 0, r.chunk_ns[0]) for r in untimed])
    rows = server_batches([r for r in ok if r.server_prompt_ms is not None], Streams.of(records), first_token_step)
    for r, others in zip(untimed, meanwhile, strict=True):
        if others != 1:  # someone else ran meanwhile (1: itself)
            continue
        begin, first = r.sent_ns or 0, r.chunk_ns[0]
        step_ms = float(np.median(np.diff(np.asarray(r.chunk_ns, dtype=np.int64)))) / 1e6
        prompt = _uncached(r) / 1e3
        rows.append([(first - begin) / 1e6 - first_token_step * step_ms, 1.0, prompt, prompt, 1.0])
    return np.asarray(rows, dtype=np.float64).reshape(-1, 5)


def _uncached(r: RequestRecord) -> int:
    return (r.prompt_tokens or r.prompt_tokens_requested) - (r.cached_tokens or 0)


BATCHED_WITHIN = 0.05  # prompt windows whose ends and starts lie this close (of their length) were one batch


def server_batches(timed: Sequence[RequestRecord], streams: Streams, first_token_step: int) -> list[list[float]]:
    """One row per batch of prompts the server timed as processed together — their windows (first token less
    its step's wait, less `prompt_ms`) start and end within 5% of their length — and overlapped by no other
    prompt: [the batch's prompt ms, its prompts + the streams decoding meanwhile, context/1000, prompt
    tokens/1000, prompts]."""
    windows = []
    for r in timed:
        wait = first_token_step * float(np.median(np.diff(np.asarray(r.chunk_ns, dtype=np.int64))))
        end = int(r.chunk_ns[0] - wait)
        windows.append((end - int((r.server_prompt_ms or 0.0) * 1e6), end))
    order = sorted(range(len(timed)), key=lambda i: windows[i][1])
    groups: list[list[int]] = []
    for i in order:
        begin, end = windows[i]
        if groups:
            b0, e0 = windows[groups[-1][0]]
            if abs(end - e0) <= BATCHED_WITHIN * (e0 - b0) and abs(begin - b0) <= BATCHED_WITHIN * (e0 - b0):
                groups[-1].append(i)
                continue
        groups.append([i])
    spans = [(min(windows[i][0] for i in g), max(windows[i][1] for i in g)) for g in groups]
    overlapped = overlapping(windows, spans) if groups else np.zeros(0)
    rows = []
    for g, (begin, end), n in zip(groups, spans, overlapped, strict=True):
        if n != len(g):  # another prompt was processed meanwhile
            continue
        seqs, context = streams.held(np.array([(begin + end) // 2], dtype=np.int64))
        prompt = sum(_uncached(timed[i]) for i in g) / 1e3
        rows.append([float(np.median([timed[i].server_prompt_ms or 0.0 for i in g])), float(seqs[0]) + len(g),
                     float(context[0]) / 1e3 + prompt, prompt, float(len(g))])
    return rows
