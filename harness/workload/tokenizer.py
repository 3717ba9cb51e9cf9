"""Prompts of an exact length for a real model's tokenizer, loaded from a local directory (never downloaded).

The shared one-token-per-word tokenizer is exact against the simulator; a real endpoint counts with
its own tokenizer. Given its `tokenizer.json` (a Hugging Face model directory holds one), a prompt is
a unique lead of a few words followed by a window of one corpus tokenised once per maker, cut at word
starts: its text is one decode, and its length is known without encoding it again.

That holds for tokenizers that split text at spaces before merging (byte-level BPE as in GPT-2 and
Llama 3, Metaspace as in Llama 2 and Mistral): a window that starts and ends at word starts re-encodes
to itself. It is checked once, when the maker is built, on sample windows; a tokenizer that fails the
check gets every prompt verified by a second encode and trimmed or extended until it counts right.
Tokenizer calls go through the batch API, which releases the GIL: prompts are built on a worker thread
(`harness.run.lookahead`) without holding up the event loop.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from harness.errors import TokenizerError
from harness.tokens import make_text

CORPUS_WORDS = 20_000
LEAD_WORDS = 4  # 980⁴ ≈ 10¹² leads: no two prompts share a first block by chance
_CHECKS = 24  # sample windows verified when the maker is built
_TRIES = 32


class HFPromptMaker:
    def __init__(self, path: Path) -> None:
        file = path / "tokenizer.json" if path.is_dir() else path
        try:
            self.tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust library raises its own exception type
            raise TokenizerError(f"{file}: cannot load a tokenizer: {exc}") from None
        encoding = self._encode(" " + make_text(CORPUS_WORDS, 7))
        self.corpus = np.asarray(encoding.ids, dtype=np.int64)
        if self.corpus.size == 0:
            raise TokenizerError(f"{file}: the tokenizer produced no tokens for plain text")
        self.pool = np.unique(self.corpus)  # ordinary word tokens, special tokens excluded
        # Word starts: where a window may begin or end. Tokens of one word share its word id.
        words = np.asarray([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
        self._starts = np.concatenate([[True], words[1:] != words[:-1], [True]])
        self.windows_exact = self._check_windows()

    def _encode(self, text: str) -> Encoding:
        return self.tokenizer.encode_batch([text], add_special_tokens=False)[0]

    def count(self, text: str) -> int:
        return len(self._encode(text).ids)

    def _decode(self, ids: np.ndarray) -> str:
        return str(self.tokenizer.decode_batch([ids.tolist()], skip_special_tokens=False)[0])

    def _check_windows(self) -> bool:
        rng = np.random.default_rng(11)
        sizes = [8, 50, 333, 2000, 9000]  # past the lead: shorter prompts are always verified
        for k in range(_CHECKS):
            n = sizes[k % len(sizes)]
            text, _ = self._window_prompt(n, int(rng.integers(1 << 62)))
            if self.count(text) != n:
                return False
        return True

    def _window_prompt(self, num_tokens: int, seed: int) -> tuple[str, np.ndarray | None]:
        """The lead and a window of the corpus of `num_tokens` tokens in all, if the tokenizer's word starts
        hold; else the lead and the window's ids, for `__call__` to verify."""
        rng = np.random.default_rng(seed)
        lead = make_text(LEAD_WORDS, int(rng.integers(1 << 62)))
        size = num_tokens - self.count(lead)
        if size <= 0:
            return lead, None  # a prompt shorter than the lead: verified and cut by the caller
        window = self._window(size, rng)
        text = self._decode(window)
        return lead + ("" if text[:1].isspace() else " ") + text, window

    def _window(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """`size` corpus tokens from a seeded word start, ending at a word start where one is that far on."""
        corpus, starts = self.corpus, self._starts
        if size + 1 > corpus.size:  # longer than the corpus: the corpus again after itself (it opens a word)
            reps = -(-(size + 1) // corpus.size) + 1
            corpus = np.tile(corpus, reps)
            starts = np.concatenate([np.tile(starts[:-1], reps), [True]])
        for _ in range(_TRIES):  # most tokens start a word: a few draws find a window with both ends on one
            begin = int(rng.integers(0, corpus.size - size + 1))
            if starts[begin] and starts[begin + size]:
                return corpus[begin:begin + size]
        both = np.flatnonzero(starts[: corpus.size - size + 1] & starts[size:])
        begin = int(rng.choice(both)) if both.size else int(rng.integers(0, corpus.size - size + 1))
        return corpus[begin:begin + size]

    def __call__(self, num_tokens: int, seed: int) -> str:
        """A text of exactly `num_tokens` tokens (seeded), or the closest the tokenizer allows."""
        text, window = self._window_prompt(num_tokens, seed)
        if self.windows_exact and window is not None:
            return text
        return self._verified(text, num_tokens, seed)

    def _verified(self, text: str, num_tokens: int, seed: int) -> str:
        """Encode, then trim or extend by what is missing, until the text counts `num_tokens` tokens."""
        rng = np.random.default_rng([seed, 1])
        for _ in range(8):  # decoding then encoding can merge or split a few tokens at the seams
            ids = np.asarray(self._encode(text).ids, dtype=np.int64)
            if ids.size == num_tokens:
                break
            if ids.size > num_tokens:
                ids = ids[: max(1, num_tokens)]
            else:
                ids = np.concatenate([ids, rng.choice(self.pool, size=num_tokens - ids.size)])
            text = self._decode(ids)
        return text


def train_demo_tokenizer(directory: Path, vocab_size: int = 4000, pre_split: bool = True) -> Path:
    """A byte-level BPE tokenizer trained on the harness's own words, saved as `directory/tokenizer.json`:
    `workload.tokenizer` without a model download (the tests and benches use it). `pre_split=False` merges
    across spaces, as tokenizers without a pre-tokenizer do."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre_split)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([make_text(200, s) for s in range(300)],
                            trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"], show_progress=False))
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    return directory
