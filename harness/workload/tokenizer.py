"""Prompts of an exact length for a real model's tokenizer, loaded from a local directory (never downloaded).

The shared one-token-per-word tokenizer is exact against the simulator; a real endpoint counts with
its own tokenizer. Given its `tokenizer.json` (a Hugging Face model directory holds one), prompts are
built from that tokenizer's own tokens: seeded token ids are decoded to text, and the text is
re-encoded and trimmed or extended until it counts exactly as asked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from harness.errors import TokenizerError
from harness.tokens import make_text


class HFPromptMaker:
    def __init__(self, path: Path) -> None:
        file = path / "tokenizer.json" if path.is_dir() else path
        try:
            self.tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust library raises its own exception type
            raise TokenizerError(f"{file}: cannot load a tokenizer: {exc}") from None
        # A pool of ordinary word tokens: the ids of a long plain-text sample, special tokens excluded.
        sample = make_text(20_000, 7)
        ids = self.tokenizer.encode(sample, add_special_tokens=False).ids
        self.pool = np.unique(np.asarray(ids, dtype=np.int64))
        if self.pool.size == 0:
            raise TokenizerError(f"{file}: the tokenizer produced no tokens for plain text")

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def __call__(self, num_tokens: int, seed: int) -> str:
        """A text of exactly `num_tokens` tokens (seeded), or the closest the tokenizer allows."""
        rng = np.random.default_rng(seed)
        ids = list(rng.choice(self.pool, size=num_tokens))
        text = self.tokenizer.decode(ids)
        for _ in range(8):  # decoding then encoding can merge or split a few tokens at the seams
            got = self.count(text)
            if got == num_tokens:
                break
            if got > num_tokens:
                ids = ids[: max(1, len(ids) - (got - num_tokens))]
            else:
                ids += list(rng.choice(self.pool, size=num_tokens - got))
            text = self.tokenizer.decode(ids)
        return text
