"""Which server of a pool takes a request: what sits in front of a fleet (docs/fleets.md, "Routers").

A router sees only what a real one sees: each server's queue (running and waiting, as /metrics says) and,
for the prefix-aware one, the prompts it has itself sent each server — llm-d's approximate prefix index, not
the servers' caches.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from harness.config.fleet import Router
from harness.sim.engine import Engine, SimRequest

# llm-d's default scheduling profile: prefix-cache scorer weight 3, queue scorer weight 2
PREFIX_WEIGHT, QUEUE_WEIGHT = 3.0, 2.0


class Picker(Protocol):
    def pick(self, req: SimRequest, engines: Sequence[Engine]) -> int: ...


def outstanding(engine: Engine) -> int:
    return len(engine.running) + len(engine.waiting)


class RoundRobin:
    def __init__(self) -> None:
        self._turn = itertools.count()

    def pick(self, req: SimRequest, engines: Sequence[Engine]) -> int:
        return next(self._turn) % len(engines)


class LeastOutstanding:
    def pick(self, req: SimRequest, engines: Sequence[Engine]) -> int:
        return min(range(len(engines)), key=lambda i: outstanding(engines[i]))


class PrefixAware:
    """Score = 3 × the share of the prompt's blocks last sent to that server + 2 × its queue score (1 for
    the shortest queue, 0 for the longest); ties go to the fewest outstanding, then the first."""

    def __init__(self, servers: int, blocks_each: int) -> None:
        # per server: the block hashes it was sent, least recently first, as many as its KV cache holds
        self._seen: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(servers)]
        self._room = max(1, blocks_each)

    def pick(self, req: SimRequest, engines: Sequence[Engine]) -> int:
        waits = [len(e.waiting) for e in engines]
        low, high = min(waits), max(waits)
        blocks = max(1, len(req.block_hashes))

        def score(i: int) -> tuple[float, int, int]:
            queue = 1.0 if high == low else (high - waits[i]) / (high - low)
            hit = _prefix_blocks(self._seen[i], req.block_hashes) / blocks
            return (PREFIX_WEIGHT * hit + QUEUE_WEIGHT * queue, -outstanding(engines[i]), -i)

        best = max(range(len(engines)), key=score)
        self._remember(best, req.block_hashes)
        return best

    def _remember(self, server: int, hashes: list[int]) -> None:
        seen = self._seen[server]
        for h in hashes:
            seen[h] = None
            seen.move_to_end(h)
        while len(seen) > self._room:
            seen.popitem(last=False)


def _prefix_blocks(seen: OrderedDict[int, None], hashes: list[int]) -> int:
    n = 0
    for h in hashes:  # chained hashes: a block matches only when every one before it does
        if h not in seen:
            break
        n += 1
    return n


def picker(router: Router, servers: int, blocks_each: int) -> Picker:
    if router == "least_outstanding":
        return LeastOutstanding()
    if router == "prefix_aware":
        return PrefixAware(servers, blocks_each)
    return RoundRobin()
