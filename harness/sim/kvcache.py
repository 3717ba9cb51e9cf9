"""The KV block pool, with prefix caching by chains of block hashes (vLLM's automatic prefix caching).

A block holds 16 tokens. A full block is identified by the hash of its tokens chained with the hash
of the block before it, so two requests share a cached block only when everything before it is the
same too. Blocks a request holds privately are counted; full blocks are promoted into the cache,
where any number of requests can reference them. Cached blocks that nobody references stay cached
(and can be hit again) until their space is needed, least recently released first.

Invariant: total = free + Σ private blocks of requests + cached blocks.

The cache is one ordered map, hash → references, rather than a reference count and an LRU list apiece: a
block costs ~200 bytes instead of ~290 (bench/sim_memory.py). Unreferenced blocks are kept in the order they
were released; a referenced block met at the front while evicting is moved to the back, so each eviction stays
O(1) on average and the least recently released block still goes first.
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
    def __init__(self, total: int, caching: bool = True, tail_first: bool = True) -> None:
        self.total = total
        self.caching = caching
        self.tail_first = tail_first  # False: vLLM 0.11's order, a chain's head first
        self.free = total
        self._cached: OrderedDict[int, int] = OrderedDict()  # hash → references; unreferenced ones LRU first
        self._evictable = 0
        self.query_tokens = 0
        self.hit_tokens = 0

    @property
    def available(self) -> int:
        return self.free + self._evictable

    @property
    def used(self) -> int:
        return self.total - self.available

    def match_prefix(self, table: BlockTable, max_tokens: int) -> int:
        """Reference the longest cached prefix of `table` (at most `max_tokens`); returns tokens hit.
        Counted apart (`count_lookup`), when the request is admitted."""
        if not self.caching or table.refs:
            return 0
        limit = max_tokens // BLOCK_TOKENS
        for h in table.hashes[:limit]:
            if h not in self._cached:
                break
            self._reference(h)
            table.refs.append(h)
        return len(table.refs) * BLOCK_TOKENS

    def count_lookup(self, query_tokens: int, hit_tokens: int) -> None:
        """A request's lookup as vLLM 0.33 exports it: once, when the request is first admitted (a request
        that waits for room, or comes back after preemption, is not counted again; vLLM PRs #25787, #48860)."""
        if self.caching:
            self.query_tokens += query_tokens
            self.hit_tokens += hit_tokens

    def allocate(self, table: BlockTable, n: int) -> bool:
        """Give `table` n more private blocks, evicting unreferenced cached blocks if needed."""
        if n > self.available:
            return False
        cached = self._cached
        while self.free < n:
            h = next(iter(cached))
            if cached[h]:
                cached.move_to_end(h)  # referenced: out of the way; its place is set again when released
                continue
            del cached[h]
            self._evictable -= 1
            self.free += 1
        self.free -= n
        table.private += n
        return True

    def promote(self, table: BlockTable, computed_tokens: int) -> None:
        """Move the request's newly full blocks (up to `computed_tokens`) from private into the shared cache."""
        if not self.caching:
            return
        full = min(computed_tokens // BLOCK_TOKENS, len(table.hashes))
        while len(table.refs) < full and table.private > 0:
            h = table.hashes[len(table.refs)]
            table.private -= 1
            if h in self._cached:
                self.free += 1  # someone cached the same block meanwhile: ours is a duplicate
                self._reference(h)
            else:
                self._cached[h] = 1
            table.refs.append(h)

    def release(self, table: BlockTable) -> None:
        """Give back a request's blocks. Cached ones become evictable tail first (vLLM frees a request's blocks
        in reverse order), so the least useful end of a chain goes before its prefix, which others may share."""
        self.free += table.private
        table.private = 0
        cached = self._cached
        for h in reversed(table.refs) if self.tail_first else table.refs:
            count = cached[h] - 1
            cached[h] = count
            if count == 0:
                cached.move_to_end(h)
                self._evictable += 1
        table.refs = []

    def _reference(self, h: int) -> None:
        count = self._cached[h]
        if count == 0:
            self._evictable -= 1
        self._cached[h] = count + 1
