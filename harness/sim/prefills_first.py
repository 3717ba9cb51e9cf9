"""vLLM's scheduler before chunked prefill (the V0 engine's default through 0.4, the baseline Splitwise and
DistServe measured against): a step runs waiting prompts or running decodes, never both.

Waiting prompts go first, each whole, as many as the token budget and the sequence cap hold (a prompt longer
than the budget alone in its step, as V0 required a budget of at least the context); only when none can be
admitted does every running request decode one token, the newest preempted by recompute when the KV cache is
full. So a prompt's arrival stalls every running answer for its whole prefill: the interference
disaggregation removes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sim.engine import Engine, SimRequest


def prefills_first(engine: Engine, now_ns: int) -> list[tuple[SimRequest, int]]:
    budget = engine.config.max_num_batched_tokens
    work: list[tuple[SimRequest, int]] = []
    while engine.waiting and len(engine.running) < engine.config.max_num_seqs:
        head = engine.waiting[0]
        if head.arrival_ns > now_ns:
            break
        whole = head.total_tokens - head.computed
        if whole > budget and work:
            break  # the next step's, alone
        n = engine.admit_head(head, max(whole, budget), now_ns)
        if n == 0:
            break
        work.append((engine.running[-1], n))
        budget -= n
        if budget <= 0:
            break
    if work:
        return work
    i = 0
    while i < len(engine.running):  # the newest is preempted first, so the walk sees each survivor once
        req = engine.running[i]
        if not engine.grow(req, 1):
            break
        work.append((req, 1))
        i += 1
    return work
