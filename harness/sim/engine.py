"""A continuous-batching engine, one step at a time (vLLM V1 style), with no clock of its own.

Each step the scheduler serves running requests first (one decode token each, or the next
chunk of their prefill), then admits waiting requests first-come-first-served while the token
budget, the sequence cap and the KV block pool allow. When a running request needs a KV block
and none is free, the newest running request is preempted and later recomputed from scratch.
All tokens of a step are released together at its end. Drivers (real time, virtual time)
decide when a step ends; the engine only says what it does and how long it takes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from harness.devices.step import PerformanceModel, StepCost, StepLoad
from harness.sim.kvcache import BLOCK_TOKENS, BlockPool, BlockTable, blocks_for
from harness.sim.prefills_first import prefills_first

# Which vLLM scheduler to follow: 0.33 (the default), or 0.11's older rules for comparing with deployments
# still on it (docs/vllm.md lists what differs); 0.4: the V0 engine's before chunked prefill, the baseline the
# disaggregation papers measured against (sim/prefills_first.py).
Compat = Literal["0.33", "0.11", "0.4"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_blocks: int = 26_000
    prefix_caching: bool = True
    noise_sigma: float = 0.03  # multiplicative, lognormal
    slowdown: float = 1.0  # every step this many times longer: a regression on demand
    seed: int = 0
    compat: Compat = "0.33"
    # vLLM 0.33 schedules step n+1 while step n runs: a request arriving during step n joins step n+2.
    async_scheduling: bool = False
    # llama.cpp: a request's first token leaves with the step after the one that processed its prompt.
    first_token_delay: bool = False


@dataclass(eq=False, slots=True)
class SimRequest:
    request_id: str
    prompt_tokens: int
    output_tokens: int  # how many tokens this request will generate
    arrival_ns: int
    on_token: Callable[[SimRequest], None] | None = None
    block_hashes: list[int] = field(default_factory=list)  # chained hashes of the full token blocks
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    table: BlockTable = field(init=False)
    preemptions: int = 0
    cached_tokens: int = 0  # prompt tokens found in the prefix cache when first scheduled (usage details)
    looked_up: bool = False  # its prefix was looked up once already (counted then, not again)
    scheduled_ns: int | None = None  # when it first entered a step: the end of its queue time
    token_ns: list[int] = field(default_factory=list)  # ground truth: emission time of each token
    finished: bool = False
    aborted: bool = False
    finish_reason: str = "stop"  # what the server will say when it finishes: "length" at its cap
    primed: bool = False  # its prompt is processed and its first token held for the next step (first_token_delay)
    # A fleet's: prompt tokens whose KV arrived from a prefill server (used at admission, dropped with the rest
    # on preemption), and whether a finished request's blocks wait for its KV to leave (`release`)
    external: int = 0
    hold_kv: bool = False

    def __post_init__(self) -> None:
        self.table = BlockTable(self.block_hashes)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass(slots=True)
class TokenTally:
    """Running totals as vLLM counts them, step by step: each token as it is sampled, a prompt with its
    first."""

    generation: int = 0
    prompt: int = 0

    def emit(self, req: SimRequest, now_ns: int) -> bool:
        """Sample `req`'s next token at `now_ns`; True when it was the last one."""
        req.generated += 1
        req.token_ns.append(now_ns)
        self.generation += 1
        if req.generated == 1:
            self.prompt += req.prompt_tokens
        req.finished = req.generated >= req.output_tokens
        return req.finished


@dataclass(slots=True)
class StepAccount:
    """Where the device's time went, step by step: seconds of memory- and compute-bound steps, the bytes read
    and FLOPs done over them, and the last step's utilisation of peak bandwidth (MBU) and FLOP/s (MFU)."""

    memory_bound_s: float = 0.0
    compute_bound_s: float = 0.0
    hbm_bytes: float = 0.0
    flops: float = 0.0
    last_mbu: float = 0.0
    last_mfu: float = 0.0
    # the roofline's parts summed (StepCost): which binds, beside the KV capacity (preemptions)
    memory_s: float = 0.0
    compute_s: float = 0.0
    link_s: float = 0.0

    def add(self, cost: StepCost, seconds: float, peaks: tuple[float, float] | None) -> None:
        if cost.memory_bound is None:
            return
        if cost.memory_bound:
            self.memory_bound_s += seconds
        else:
            self.compute_bound_s += seconds
        self.hbm_bytes += cost.hbm_bytes
        self.flops += cost.flops
        self.memory_s += cost.memory_s
        self.compute_s += cost.compute_s
        self.link_s += cost.link_s
        if peaks is not None:
            self.last_mbu = cost.hbm_bytes / (seconds * peaks[0])
            self.last_mfu = cost.flops / (seconds * peaks[1])


@dataclass(slots=True)
class Step:
    work: list[tuple[SimRequest, int]]  # (request, tokens computed this step)
    load: StepLoad
    duration_ns: int
    cost: StepCost


class Engine:
    def __init__(self, model: PerformanceModel, config: EngineConfig) -> None:
        self.model = model
        self.config = config
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.current = config.compat == "0.33"  # read on every request of every step
        self.whole_prompts = config.compat == "0.4"
        self.pool = BlockPool(config.kv_blocks, config.prefix_caching, tail_first=self.current)
        self.num_preemptions = 0
        self.tokens = TokenTally()
        self.stress = StepAccount()
        self.peaks = model.peaks
        self._rng = np.random.default_rng(config.seed)
        self.last_step: tuple[int, int] | None = None  # the last step's start and planned end
        self.noise_ahead: float | None = None  # a step's noise drawn and not used (`put_back`)
        self._drawn = 0.0

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        """Drop a request (client gone): its slot and blocks are free for the next step."""
        if req.finished or req.aborted:
            return
        req.aborted = True
        if req in self.running:
            self.running.remove(req)
        else:
            self.waiting.remove(req)
        self.pool.release(req.table)

    def release(self, req: SimRequest) -> None:
        """Free a finished request's held blocks (`hold_kv`: its KV has left for a decode server)."""
        self.pool.release(req.table)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def kv_usage(self) -> float:
        return self.pool.used / self.pool.total

    def schedule(self, now_ns: int) -> Step:
        work = prefills_first(self, now_ns) if self.whole_prompts else self._chunked(now_ns)
        load = self._load(work)
        cost = self.model.step_cost(load)
        step = Step(work, load, self.duration_ns(cost.seconds), cost)
        self.last_step = (now_ns, now_ns + step.duration_ns) if work else None
        return step

    def _chunked(self, now_ns: int) -> list[tuple[SimRequest, int]]:
        budget = self.config.max_num_batched_tokens
        work: list[tuple[SimRequest, int]] = []
        preemptions = self.num_preemptions
        running, pool = self.running, self.pool
        promote = self.current and pool.caching
        i = 0
        # Preemption only ever takes the newest running request, so the list shrinks from its end
        # and an index walk visits each surviving request exactly once.
        while i < len(running) and budget > 0:
            req = running[i]
            computed, table = req.computed, req.table
            n = req.prompt_tokens + req.generated - computed
            if n > budget:
                n = budget
            shared = len(table.refs)
            if computed + n <= (table.private + shared) * BLOCK_TOKENS:
                # Within the blocks it holds (a decode, 15 steps in 16): nothing to allocate, and only a
                # prompt's blocks can still be promoted — the per-sequence cost of a step, kept short.
                if promote and shared < len(table.hashes):
                    pool.promote(table, computed + n)
            elif not self.grow(req, n):
                break  # req itself was the newest and got preempted
            work.append((req, n))
            budget -= n
            i += 1
        if self.num_preemptions > preemptions and self.current:
            budget = 0  # vLLM 0.33 admits no one in a step that had to preempt
        cutoff = self._cutoff(now_ns, bool(work))
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            if self.waiting[0].arrival_ns > cutoff:
                break
            n = self.admit_head(self.waiting[0], budget, now_ns)
            if n == 0:
                break
            work.append((self.running[-1], n))
            budget -= n
        return work

    def _cutoff(self, now_ns: int, busy: bool) -> int:
        """The latest arrival this step can admit. With async scheduling, a step that follows the last one
        back to back was scheduled when the last one began (vLLM's engine core schedules one step ahead), so
        only what had arrived by then; after an idle engine, or with nothing else to run (the step scheduled
        ahead was empty), all that has arrived."""
        last = self.last_step
        if self.config.async_scheduling and busy and last is not None and now_ns <= last[1]:
            return last[0]
        return now_ns

    def admit_head(self, req: SimRequest, budget: int, now_ns: int) -> int:
        """Move the head of the queue into the batch with its first chunk; 0 when it does not fit yet.

        As vLLM 0.33 (`scheduler_reserve_full_isl`), a request is admitted only when its whole prompt's blocks
        fit, not just its first chunk's (0.11 checked the first chunk only, and counted every lookup)."""
        current = self.current
        hit = 0
        if req.computed == 0:
            # At least the last token is computed afresh: its logits are what samples the next.
            hit = self.pool.match_prefix(req.table, req.total_tokens - 1)
            req.computed = max(hit, min(req.external, req.total_tokens - 1))
            if not current:
                self.pool.count_lookup(req.total_tokens - 1, hit)
        n = min(req.total_tokens - req.computed, budget)
        whole = blocks_for(req.total_tokens if current else req.computed + n) - req.table.blocks
        if whole > self.pool.available or not self.pool.allocate(req.table, blocks_for(req.computed + n)
                                                                   - req.table.blocks):
            # A waiting request must not pin cached blocks: a preempted request queued in front
            # of it could need exactly those, and neither would ever run.
            self.pool.release(req.table)
            req.computed = 0
            return 0
        self.waiting.popleft()
        self.running.append(req)
        if not req.looked_up and current:
            req.looked_up = True
            self.pool.count_lookup(req.total_tokens - 1, hit)
        if req.scheduled_ns is None:
            req.scheduled_ns = now_ns
            req.cached_tokens = hit  # what its first admission found cached (usage details)
        self._scheduled(req, n)
        return n

    def grow(self, req: SimRequest, n: int) -> bool:
        """Give `req` the blocks for n more tokens, preempting the newest requests if needed."""
        need = blocks_for(req.computed + n) - req.table.blocks
        while not self.pool.allocate(req.table, need):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
        self._scheduled(req, n)
        return True

    def _scheduled(self, req: SimRequest, n: int) -> None:
        if self.current:
            # vLLM 0.33 caches blocks when they are scheduled: a request admitted later in this step hits
            # them.
            self.pool.promote(req.table, req.computed + n)

    def _preempt(self, req: SimRequest) -> None:
        # Recompute: the KV is dropped; later the prompt and the tokens generated so far are
        # prefilled again, and generation resumes where it stopped.
        self.running.remove(req)
        self.pool.release(req.table)
        req.computed = req.external = 0
        req.preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    @staticmethod
    def _load(work: list[tuple[SimRequest, int]]) -> StepLoad:
        # summed in locals, not on the StepLoad: this loop runs for every sequence of every step
        tokens = decodes = context = cached = 0
        attn = 0.0
        for req, n in work:
            tokens += n
            computed = req.computed
            if n == 1 and computed > 0:
                decodes += 1
                context += computed + 1
            else:
                cached += computed
                attn += n * (computed + n / 2)
        return StepLoad(tokens=tokens, seqs=len(work), decodes=decodes, decode_context=context,
                        prefill_cached=cached, prefill_attn=attn)

    def duration_ns(self, seconds: float) -> int:
        seconds *= self.config.slowdown
        if self.config.noise_sigma > 0:
            z = self.noise_ahead if self.noise_ahead is not None else self._rng.standard_normal()
            self.noise_ahead, self._drawn = None, z
            seconds *= math.exp(self.config.noise_sigma * z)
        return max(1, round(seconds * 1e9))

    def put_back(self) -> None:
        """The last step priced was not taken (`decode_ahead` at its horizon): its noise is the next step's, as
        it would have been."""
        if self.config.noise_sigma > 0:
            self.noise_ahead = self._drawn

    def complete(self, step: Step, now_ns: int) -> None:
        """Apply a finished step: advance KV, emit the tokens it sampled, retire finished requests."""
        self.stress.add(step.cost, step.duration_ns / 1e9, self.peaks)
        pool, tally, later, delay = self.pool, self.tokens, not self.current, self.config.first_token_delay
        for req, n in step.work:
            if req.aborted:
                continue
            req.computed += n
            if later:
                pool.promote(req.table, req.computed)  # 0.11: cached once computed, at the step's end
            if req.computed < req.prompt_tokens + req.generated:
                continue  # mid-prefill chunk: nothing sampled yet
            if delay and req.generated == 0 and not req.primed:
                req.primed = True  # it rides the next step (counted among its sequences) and leaves at its end
                continue
            if tally.emit(req, now_ns):
                self.running.remove(req)
                if not req.hold_kv:
                    pool.release(req.table)
            if req.on_token is not None:
                req.on_token(req)
