"""The KV block pool's preallocated bookkeeping (an open-addressing table, an LRU list in arrays) against the plain
dict and ordered dict it replaced, over random requests whose hashes collide on purpose: the same hits, the
same evictions, the same counts, and no memory taken after it is made."""

from __future__ import annotations

import random
import tracemalloc
from collections import OrderedDict

import pytest

from harness.sim.kvcache import BLOCK_TOKENS, BlockPool, BlockTable


class Reference:
    """The pool as it was: hash → references, and the unreferenced in an ordered dict, oldest first."""

    def __init__(self, total: int) -> None:
        self.free, self.refs, self.lru = total, dict[int, int](), OrderedDict[int, None]()

    @property
    def available(self) -> int:
        return self.free + len(self.lru)

    def match(self, hashes: list[int]) -> list[int]:
        hit = []
        for h in hashes:
            if h not in self.refs:
                break
            self._ref(h)
            hit.append(h)
        return hit

    def allocate(self, n: int) -> bool:
        if n > self.available:
            return False
        while self.free < n:
            h, _ = self.lru.popitem(last=False)
            del self.refs[h]
            self.free += 1
        self.free -= n
        return True

    def promote(self, h: int) -> None:
        if h in self.refs:
            self.free += 1
            self._ref(h)
        else:
            self.refs[h] = 1

    def release(self, held: list[int], private: int) -> None:
        self.free += private
        for h in reversed(held):
            self.refs[h] -= 1
            if self.refs[h] == 0:
                self.lru[h] = None

    def _ref(self, h: int) -> None:
        if self.refs[h] == 0:
            del self.lru[h]
        self.refs[h] += 1


@pytest.mark.parametrize("seed", range(6))
def test_the_preallocated_pool_hits_and_evicts_as_the_dicts_did(seed: int) -> None:
    rng = random.Random(seed)
    total = 64
    pool, ref = BlockPool(total), Reference(total)
    # Few distinct chains, hashes equal modulo the table's size: long probe runs, deletions inside them
    chains = [[rng.choice([-1, 1]) * (rng.randrange(1, 40) * 4096 + k % 3) for k in range(rng.randrange(1, 9))]
              for _ in range(30)]
    live: list[tuple[BlockTable, list[int]]] = []
    for _ in range(3000):
        if live and (rng.random() < 0.45 or len(live) > 6):
            table, held = live.pop(rng.randrange(len(live)))
            ref.release(held, table.private)
            pool.release(table)
        else:
            hashes = rng.choice(chains)
            table = BlockTable(list(hashes))
            hit = pool.match_prefix(table, len(hashes) * BLOCK_TOKENS)
            held = ref.match(hashes)
            assert hit == len(held) * BLOCK_TOKENS
            need = len(hashes) - len(held) + rng.randrange(0, 3)
            ok = pool.allocate(table, need)
            assert ok == ref.allocate(need)
            if ok:
                pool.promote(table, len(hashes) * BLOCK_TOKENS)
                while len(held) < len(hashes) and need > 0:
                    ref.promote(hashes[len(held)])
                    held.append(hashes[len(held)])
                    need -= 1
            live.append((table, held))
        assert (pool.available, pool.free) == (ref.available, ref.free)
        assert pool.used == total - ref.available
    for table, held in live:
        ref.release(held, table.private)
        pool.release(table)
    assert pool.available == total == ref.available


def test_a_full_pool_under_churn_takes_no_more_memory() -> None:
    pool = BlockPool(2000)
    rng = random.Random(1)
    tracemalloc.start()
    try:
        for _ in range(3000):  # 18,000 blocks through a pool of 2,000: every block evicted many times
            table = BlockTable([rng.getrandbits(63) for _ in range(6)])
            pool.match_prefix(table, 96)
            assert pool.allocate(table, 6)
            pool.promote(table, 96)
            pool.release(table)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pool.available == 2000 and held < 64 * 1024, held
