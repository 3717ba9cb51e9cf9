"""What a prompt of exact length costs to build with a real BPE tokenizer, before and after issue 16.

A byte-level BPE of 4,000 tokens is trained here on the harness's own words (as the tests do). "Before"
is the earlier way, kept here as the baseline: seeded token ids drawn from the vocabulary, decoded, then
re-encoded and trimmed or extended until the count is right (random subword strings encode slowly, and
each prompt paid at least two full encodes). "After" is `HFPromptMaker`: a lead of four words and a window
of a corpus tokenised once, cut at word starts — one decode a prompt. Each figure is the mean over one
second of building, on one core; both are exact (checked).

    .venv/bin/python bench/prompts.py [--vocab 4000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.workload.tokenizer import HFPromptMaker, train_demo_tokenizer


def before(maker: HFPromptMaker) -> Callable[[int, int], str]:
    tok = maker.tokenizer

    def build(num_tokens: int, seed: int) -> str:
        rng = np.random.default_rng(seed)
        ids = list(rng.choice(maker.pool, size=num_tokens))
        text = tok.decode(ids)
        for _ in range(8):
            got = len(tok.encode(text, add_special_tokens=False).ids)
            if got == num_tokens:
                break
            if got > num_tokens:
                ids = ids[: max(1, len(ids) - (got - num_tokens))]
            else:
                ids += list(rng.choice(maker.pool, size=num_tokens - got))
            text = tok.decode(ids)
        return text

    return build


def per_prompt_ms(build: Callable[[int, int], str], n: int, seconds: float = 1.0) -> float:
    start, k = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        build(n, k)
        k += 1
    return (time.perf_counter() - start) / k * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=4000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        maker = HFPromptMaker(train_demo_tokenizer(Path(tmp), args.vocab))
        old = before(maker)
        print(f"byte-level BPE, vocabulary {args.vocab}; ms a prompt (mean over 1 s), exact: both")
        print(f"{'tokens':>7} {'before':>8} {'after':>8}")
        for n in (50, 2000, 8000):
            assert maker.count(maker(n, 1)) == n and maker.count(old(n, 1)) == n
            print(f"{n:>7} {per_prompt_ms(old, n):>8.2f} {per_prompt_ms(maker, n):>8.2f}", flush=True)


if __name__ == "__main__":
    main()
