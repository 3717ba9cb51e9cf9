"""The KV block pool, with prefix caching by chains of block hashes (vLLM's automatic prefix caching).

A block holds 16 tokens. A full block is identified by the hash of its tokens chained with the hash
of the block before it, so two requests share a cached block only when everything before it is the
same too. Blocks a request holds privately are counted; full blocks are promoted into the cache,
where any number of requests can reference them. Cached blocks that nobody references stay cached
(and can be hit again) until their space is needed, least recently released first.

Invariant: total = free + Σ private blocks of requests + cached blocks.

The cache's bookkeeping is allocated whole when the pool is made, as an engine allocates its KV pool: flat
arrays indexed by block (its hash, its references, its place in the LRU list of unreferenced blocks) and an
open-addressing table from hash to block, ~45 bytes a block. Grown as dicts instead, it filled for minutes
under a steady load (~200–290 bytes a cached block, 5–8 MiB for an 80 GB GPU's pool, then a table doubling
under churn) and read as a leak in the simulator's memory (bench/sim_memory.py).
"""

from __future__ import annotations

import math
from array import array
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
    """What one request holds: private blocks, and references to cached blocks (a prefix chain), by block
    id."""

    __slots__ = ("hashes", "private", "refs")

    def __init__(self, hashes: list[int]) -> None:
        self.hashes = hashes
        self.private = 0
        self.refs: list[int] = []

    @property
    def blocks(self) -> int:
        return self.private + len(self.refs)


_NONE = -1


class BlockPool:
    def __init__(self, total: int, caching: bool = True, tail_first: bool = True) -> None:
        self.total = total
        self.caching = caching
        self.tail_first = tail_first  # False: vLLM 0.11's order, a chain's head first
        self.free = total
        self.query_tokens = 0
        self.hit_tokens = 0
        cached = total if caching else 0
        slots = 1 << max(4, (2 * cached).bit_length())  # at most half full: short probes
        self._mask = slots - 1
        self._table = array("i", [_NONE]) * slots  # slot → block id
        self._hash = array("q", bytes(8 * cached))  # block id → its chained hash
        self._refs = array("i", bytes(4 * cached))  # block id → requests referencing it
        self._prev = array("i", [_NONE]) * cached  # the LRU list of unreferenced cached blocks, oldest first
        self._next = array("i", [_NONE]) * cached
        self._head = self._tail = _NONE
        self._ids = array("i", range(cached - 1, -1, -1))  # block ids not caching anything
        self._evictable = 0

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
            block = self._find(h)
            if block == _NONE:
                break
            self._reference(block)
            table.refs.append(block)
        return len(table.refs) * BLOCK_TOKENS

    def count_lookup(self, query_tokens: int, hit_tokens: int) -> None:
        """A request's lookup as vLLM 0.33 exports it: once, when the request is first admitted (a request
        that waits for room, or comes back after preemption, is not counted again; vLLM PRs #25787,
        #48860)."""
        if self.caching:
            self.query_tokens += query_tokens
            self.hit_tokens += hit_tokens

    def allocate(self, table: BlockTable, n: int) -> bool:
        """Give `table` n more private blocks, evicting unreferenced cached blocks if needed."""
        if n > self.available:
            return False
        while self.free < n:
            block = self._head
            self._unlink(block)
            self._forget(block)
            self._evictable -= 1
            self.free += 1
        self.free -= n
        table.private += n
        return True

    def promote(self, table: BlockTable, computed_tokens: int) -> None:
        """Move the request's newly full blocks (up to `computed_tokens`) from private into the shared
        cache."""
        if not self.caching:
            return
        full = min(computed_tokens // BLOCK_TOKENS, len(table.hashes))
        while len(table.refs) < full and table.private > 0:
            h = table.hashes[len(table.refs)]
            table.private -= 1
            block = self._find(h)
            if block != _NONE:
                self.free += 1  # someone cached the same block meanwhile: ours is a duplicate
                self._reference(block)
            else:
                block = self._remember(h)
                self._refs[block] = 1
            table.refs.append(block)

    def release(self, table: BlockTable) -> None:
        """Give back a request's blocks. Cached ones become evictable tail first (vLLM frees a request's
        blocks in reverse order), so the least useful end of a chain goes before its prefix, which others may
        share."""
        self.free += table.private
        table.private = 0
        refs = self._refs
        for block in reversed(table.refs) if self.tail_first else table.refs:
            count = refs[block] - 1
            refs[block] = count
            if count == 0:
                self._append(block)
                self._evictable += 1
        table.refs = []

    def _reference(self, block: int) -> None:
        if self._refs[block] == 0:
            self._unlink(block)
            self._evictable -= 1
        self._refs[block] += 1

    # The hash table: linear probing from the hash's slot; deletion shifts the entries after it back, so no
    # tombstones pile up under constant churn.
    def _find(self, h: int) -> int:
        table, hashes, mask = self._table, self._hash, self._mask
        i = h & mask
        while (block := table[i]) != _NONE:
            if hashes[block] == h:
                return block
            i = (i + 1) & mask
        return _NONE

    def _remember(self, h: int) -> int:
        block = self._ids.pop()
        self._hash[block] = h
        table, mask = self._table, self._mask
        i = h & mask
        while table[i] != _NONE:
            i = (i + 1) & mask
        table[i] = block
        return block

    def _forget(self, block: int) -> None:
        table, hashes, mask = self._table, self._hash, self._mask
        i = hashes[block] & mask
        while table[i] != block:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            other = table[j]
            if other == _NONE:
                break
            home = hashes[other] & mask
            # `other` may move back to the hole at i only if its home slot is not cyclically within (i, j]
            if (home <= i < j) or (i < j < home) or (j < home <= i):
                table[i] = other
                i = j
        table[i] = _NONE
        self._ids.append(block)

    # The LRU list of unreferenced cached blocks, least recently released first.
    def _append(self, block: int) -> None:
        self._prev[block] = self._tail
        self._next[block] = _NONE
        if self._tail == _NONE:
            self._head = block
        else:
            self._next[self._tail] = block
        self._tail = block

    def _unlink(self, block: int) -> None:
        before, after = self._prev[block], self._next[block]
        if before == _NONE:
            self._head = after
        else:
            self._next[before] = after
        if after == _NONE:
            self._tail = before
        else:
            self._prev[after] = before
