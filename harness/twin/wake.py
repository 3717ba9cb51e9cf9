"""Whether the engine is slower on a prompt that finds it idle than on one that follows another at once: a
finding that explains held-out misses the twin's step model cannot follow (it prices a step by what is in it,
not by what the engine did before). Pure: tested without a network.

Measured on llama-server (2 cores, Gemma 3 270M): a 128-token prompt alone took 262–318 ms back to back (the
design's prompt runs) and 350–470 ms when it arrived after 1–2 s of idling (the Poisson runs) — the threads'
wake-up and cold caches; its twins then missed the held-out Poisson TTFT by −24 to −37%."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from harness.records import RequestRecord
from harness.twin.checks import Finding

IDLE_S = 0.5  # an engine idle this long before a prompt arrives has "gone to sleep"
SLOWER = 1.15  # a prompt after idling this much slower than back to back: named
LEAST = 3  # prompts of each kind it takes


def prompt_ms(r: RequestRecord) -> float | None:
    """The server's own time on the prompt where it says it (llama.cpp), else the TTFT."""
    if r.server_prompt_ms is not None:
        return r.server_prompt_ms
    return (r.first_token_ns - r.sent_ns) / 1e6 if r.first_token_ns and r.sent_ns else None


def alone(records: Sequence[RequestRecord], tokens: int | None = None) -> tuple[list[float], list[float]]:
    """The prompt times of requests (of `tokens` prompt tokens, if given) that had the engine to themselves —
    no request of any length in flight when sent — split by whether the engine had idled `IDLE_S` before them
    (else it had just finished the one before)."""
    ok = sorted((r for r in records if r.status == "ok" and r.sent_ns and r.first_token_ns), key=lambda r: r.sent_ns
                or 0)
    idle: list[float] = []
    busy: list[float] = []
    last_end: int | None = None  # the latest end of any request sent before: in flight while beyond a send
    for r in ok:
        sent = r.sent_ns or 0
        before, last_end = last_end, max(last_end or 0, r.end_ns)
        if before is None or before > sent or (tokens is not None and r.prompt_tokens != tokens):
            continue  # the first of a run (its engine's state unknown), company, or another length
        if (took := prompt_ms(r)) is not None:
            (idle if (sent - before) / 1e9 >= IDLE_S else busy).append(took)
    return idle, busy


def wake_finding(records: Sequence[RequestRecord], tokens: int) -> Finding | None:
    """`engine-wakes-slow` where prompts of `tokens` tokens that found the engine idle took over `SLOWER` ×
    the ones that followed another at once (the median of each; `LEAST` of each at least)."""
    idle, busy = alone(records, tokens)
    if len(idle) < LEAST or len(busy) < LEAST:
        return None
    after, back = statistics.median(idle), statistics.median(busy)
    if after <= SLOWER * back:
        return None
    return Finding("engine-wakes-slow", f"a {tokens}-token prompt alone took {after:,.0f} ms after the engine idled "
                   f"{IDLE_S:g} s or more ({len(idle)} of them) and {back:,.0f} ms right after another ({len(busy)}): "
                   f"{after / back - 1:+.0%}, a cost of what the engine did before that the twin's steps do not "
                   "carry; an open-loop load's TTFT (and the streams it joins) will be slower than the twin says")
