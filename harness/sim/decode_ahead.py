"""Many decode steps in one jump, exactly as the engine would take them one by one: what makes a plan's trial
cheap (issue 66).

When every running request decodes, none waits, none finishes and nothing can arrive before a horizon, the
next steps differ only in their context (one token more a request each step): their loads, costs and noise
are the engine's own, drawn in the same order; only the per-request walk of each step is done once, at the
end, with every token's stamp. The steps end as they would have; nothing outside looks in between (no
arrival can be routed there before the horizon), so no one can tell.
"""

from __future__ import annotations

from harness.devices.step import StepLoad
from harness.sim.engine import Engine
from harness.sim.kvcache import BLOCK_TOKENS, blocks_for

MIN_STEPS = 2  # fewer is a plain step


def decode_ahead(engine: Engine, now_ns: int, horizon_ns: int) -> int | None:
    """Take as many whole decode steps from `now_ns` as end by `horizon_ns` (stopping before any request's
    last token, and before the KV cache would need a preemption); the time the last ends, or None when fewer
    than `MIN_STEPS` can be taken so (the caller takes a plain step)."""
    running, config = engine.running, engine.config
    if (engine.waiting or not running or not engine.current or config.first_token_delay
            or len(running) > config.max_num_seqs or len(running) > config.max_num_batched_tokens):
        return None
    if any(r.total_tokens - r.computed != 1 or r.computed == 0 for r in running):
        return None  # a prefill chunk in the batch
    steps = min(r.output_tokens - r.generated for r in running) - 1  # the finishing step is a plain one
    steps = min(steps, _steps_the_cache_holds(engine, steps))
    if steps < MIN_STEPS:
        return None
    seqs = len(running)
    context = sum(r.computed + 1 for r in running)
    ends: list[int] = []
    start = now_ns
    for _ in range(steps):
        cost = engine.model.step_cost(StepLoad(tokens=seqs, seqs=seqs, decodes=seqs, decode_context=context))
        end = start + engine.duration_ns(cost.seconds)
        if end > horizon_ns:
            engine.put_back()  # something may arrive first: this step is taken plainly, with this noise
            break
        engine.stress.add(cost, (end - start) / 1e9, engine.peaks)
        engine.last_step = (start, end)
        ends.append(end)
        start, context = end, context + seqs
    if not ends:
        return None
    _apply(engine, ends)
    return ends[-1]


def _steps_the_cache_holds(engine: Engine, steps: int) -> int:
    """The most steps whose new blocks fit the free ones (a step past them would preempt)."""
    free = engine.pool.available
    while steps > 0:
        need = sum(blocks_for(r.computed + steps) - r.table.blocks for r in engine.running)
        if need <= free:
            return steps
        steps = min(steps - 1, steps * free // max(need, 1))
    return 0


def _apply(engine: Engine, ends: list[int]) -> None:
    k = len(ends)
    for req in engine.running:
        engine.pool.allocate(req.table, blocks_for(req.computed + k) - req.table.blocks)
        req.computed += k
        req.generated += k
        req.token_ns.extend(ends)
        if req.computed // BLOCK_TOKENS > len(req.table.refs):
            engine.pool.promote(req.table, req.computed)
    engine.tokens.generation += k * len(engine.running)
