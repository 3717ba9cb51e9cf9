"""The KV block pool, with prefix caching by chains of block hashes (vLLM's automatic prefix caching).

A block holds 16 tokens. A full block is identified by the hash of its tokens chained with the hash
of the block before it, so two requests share a cached block only when everything before it is the
same too. Blocks a request holds privately are counted; full blocks are promoted into the cache,
where any number of requests can reference them. Cached blocks that nobody references stay cached
(and can be hit again) until their space is needed, least recently released first.

Invariant: total = free + Σ private blocks of requests + cached blocks.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

BLOCK_TOKENS = 16


def blocks_for(tokens: int) -> int:
    return math.ceil(tokens / BLOCK_TOKENS)


def block_hashes(tokens: Sequence[str]) -> list[int]:
    """Chained hashes of each full block of `tokens`."""
    out: list[int] = []
    prev = 0
    for i in range(0, len(tokens) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        prev = hash((prev, tuple(tokens[i:i + BLOCK_TOKENS])))
        out.append(prev)
    return out


class BlockTable:
    """What one request holds: private blocks, and references to cached blocks (a prefix chain)."""

    __slots__ = ("hashes", "private", "refs")

    def __init__(self, hashes: list[int]) -> None:
        self.hashes = hashes
        self.private = 0
        self.refs: list[int] = []

    @property
    def blocks(self) -> int:
        return self.private + len(self.refs)


class BlockPool:
    def __init__(self, total: int, caching: bool = True) -> None:
        self.total = total
        self.caching = caching
        self.free = total
        self._refcount: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()  # cached, unreferenced, LRU first
        self.query_tokens = 0
        self.hit_tokens = 0

    @property
    def available(self) -> int:
        return self.free + len(self._evictable)

    @property
    def used(self) -> int:
        return self.total - self.available

    def match_prefix(self, table: BlockTable, max_tokens: int, count: bool = True) -> int:
        """Reference the longest cached prefix of `table` (at most `max_tokens`); returns tokens hit.

        `count` False: a request looking again (after preemption, or after the pool had no room for it),
        which the counters leave out (else a thrashing server reports more hits than prompt tokens sent)."""
        if not self.caching or table.refs:
            return 0
        limit = max_tokens // BLOCK_TOKENS
        self.query_tokens += max_tokens if count else 0
        for h in table.hashes[:limit]:
            if h not in self._refcount:
                break
            self._reference(h)
            table.refs.append(h)
        hit = len(table.refs) * BLOCK_TOKENS
        self.hit_tokens += hit if count else 0
        return hit

    def allocate(self, table: BlockTable, n: int) -> bool:
        """Give `table` n more private blocks, evicting unreferenced cached blocks if needed."""
        if n > self.available:
            return False
        while self.free < n:
            h, _ = self._evictable.popitem(last=False)
            del self._refcount[h]
            self.free += 1
        self.free -= n
        table.private += n
        return True

    def promote(self, table: BlockTable, computed_tokens: int) -> None:
        """Move the request's newly full, computed blocks from private into the shared cache."""
        if not self.caching:
            return
        full = min(computed_tokens // BLOCK_TOKENS, len(table.hashes))
        while len(table.refs) < full and table.private > 0:
            h = table.hashes[len(table.refs)]
            table.private -= 1
            if h in self._refcount:
                self.free += 1  # someone cached the same block meanwhile: ours is a duplicate
                self._reference(h)
            else:
                self._refcount[h] = 1
            table.refs.append(h)

    def release(self, table: BlockTable) -> None:
        self.free += table.private
        table.private = 0
        for h in table.refs:
            count = self._refcount[h] - 1
            self._refcount[h] = count
            if count == 0:
                self._evictable[h] = None
        table.refs = []

    def _reference(self, h: int) -> None:
        if self._refcount[h] == 0:
            del self._evictable[h]
        self._refcount[h] += 1
