"""The default tokenizer, shared by the harness and the simulator: one token per word.

Lengths are then exact against the bundled simulator. A prompt of n tokens is n words,
seeded, so identical seeds give identical prompts (and prefix caching can see reuse).
"""

from __future__ import annotations

import operator

import numpy as np

# A fixed vocabulary of 980 three-letter pseudo-words: enough to keep prompts varied.
_VOCAB: tuple[str, ...] = tuple(
    f"{a}{b}{c}" for a in "bdfgklmnprstvz" for b in "aeiou" for c in "bdfgklmnprstvz"
)


def make_text(num_tokens: int, seed: int) -> str:
    """`num_tokens` words drawn from the vocabulary with a seeded generator."""
    return words_text(_VOCAB, num_tokens, seed)


def words_text(words: tuple[str, ...], count: int, seed: int) -> str:
    """`count` words drawn from `words` with a seeded generator, joined by spaces."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(words), size=count).tolist()
    if count < 2:
        return " ".join(words[i] for i in idx)
    return " ".join(operator.itemgetter(*idx)(words))  # one C call for all the words


VOCAB = _VOCAB
VOCAB_SIZE = len(_VOCAB)


def token_text(position: int) -> str:
    """The text the simulator streams for its `position`-th output token (leading space: one word)."""
    return " " + _VOCAB[position % len(_VOCAB)]
