"""What each request asks for: prompt text, its length and the output length, seeded and pure."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from harness.config.workload import SharedPrefixDataset, ShareGPTDataset, Workload
from harness.tokens import make_text
from harness.workload.datasets import Message, sharegpt_turns
from harness.workload.images import data_urls
from harness.workload.lengths import draw, fixed
from harness.workload.traces import MOONCAKE_BLOCK_TOKENS, TraceRow

TextMaker = Callable[[int, int], str]  # (tokens, seed) -> text of that many tokens


@dataclass(frozen=True, slots=True)
class RequestSpec:
    request_id: str
    phase: str
    index: int
    prompt: str
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool
    batch: int | None = None
    messages: tuple[Message, ...] | None = None  # chat history (multi-turn datasets); else one user turn
    session: str | None = None  # multi-turn sessions: the conversation, and this request's turn in it
    turn: int | None = None
    texts: tuple[str, ...] = ()  # a request carrying several texts (an embeddings batch); empty: the prompt alone
    images: tuple[str, ...] = ()  # images sent with the prompt, as data: URLs (workload.images)

    @property
    def inputs(self) -> int:
        """Texts the request carries."""
        return len(self.texts) or 1

    @property
    def image_bytes(self) -> int:
        """The images' encoded size: their base64 less its padding, three bytes to four characters."""
        data = (url.partition(",")[2] for url in self.images)
        return sum(len(d) * 3 // 4 - d[-2:].count("=") for d in data)


@dataclass(frozen=True, slots=True)
class RequestSource:
    """The requests of one phase, by index: request i is the same whoever asks and however many follow.

    Each phase gets its own prompts (no accidental prefix-cache hits between phases).
    """

    workload: Workload
    phase: str
    phase_index: int
    seed: int
    run_id: str
    batch_size: int | None = None
    rows: tuple[TraceRow, ...] | None = None  # from a trace: request i takes row i's lengths and blocks
    text: TextMaker = make_text  # (tokens, seed) -> text; a real model's tokenizer replaces the default
    overhead: int = 0  # tokens the server adds around a one-turn prompt (chat template, BOS): taken off the text
    inputs: int = 1  # texts in each request (an embeddings batch packed into one request), each of its own seed

    # Mixed into every prompt seed: per run by default, so a rerun, a search trial or a nightly job never
    # meets a prompt cache warmed by an earlier run; 0 (the seed alone) when prompts are reused on purpose.
    salt: int = field(init=False, default=0)
    # Every length this source draws is fixed: no generator is built for them (~21 µs a request, a quarter of
    # a spec's cost), and what a drawn length would have been is unchanged.
    fixed_lengths: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.workload.prompt_reuse == "per_run":
            object.__setattr__(self, "salt", zlib.crc32(self.run_id.encode()) + 1)
        w = self.workload
        lengths = [w.prompt_tokens, w.output_tokens]
        if isinstance(w.dataset, SharedPrefixDataset):
            lengths.append(w.dataset.question_tokens)
        object.__setattr__(self, "fixed_lengths", all(fixed(length) for length in lengths))

    def spec(self, i: int) -> RequestSpec:
        salt = self.salt
        prompt_seed = int(np.random.SeedSequence([self.seed, self.phase_index, i, salt]).generate_state(1)[0])
        w = self.workload
        rng = None if self.fixed_lengths else np.random.default_rng([self.seed, self.phase_index, i, 1])
        prompt_tokens, max_tokens = draw(w.prompt_tokens, rng), draw(w.output_tokens, rng)
        if self.rows is not None:
            row = self.rows[i]
            prompt_tokens, max_tokens = max(row.input_tokens, 1), max(row.output_tokens, 1)
        prompt, prompt_tokens, max_tokens, messages = self._prompt(i, prompt_tokens, max_tokens, prompt_seed, rng)
        texts = self._more_texts(prompt, prompt_tokens, prompt_seed)
        prompt_tokens *= len(texts) or 1
        return RequestSpec(
            request_id=f"{self.run_id}-{self.phase_index}-{i}",
            phase=self.phase,
            index=i,
            prompt=prompt,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            ignore_eos=w.ignore_eos,
            batch=None if self.batch_size is None else i // self.batch_size,
            messages=messages,
            texts=texts,
            images=data_urls(w.images, prompt_seed) if w.images is not None else (),
        )

    def _prompt(self, i: int, prompt_tokens: int, max_tokens: int, prompt_seed: int, rng: np.random.Generator | None
                ) -> tuple[str, int, int, tuple[Message, ...] | None]:
        """Request `i`'s prompt, its tokens, its answer's and its messages: from its trace row's prefix blocks,
        from the dataset, or made of `prompt_tokens`."""
        w, salt = self.workload, self.salt
        if self.rows is not None and self.rows[i].hash_ids:
            # Blocks are salted per phase too: two phases replaying the same rows do not share a cache.
            blocks = self.rows[i].hash_ids or ()
            return prompt_from_blocks(blocks, prompt_tokens, (salt, self.phase_index)), prompt_tokens, max_tokens, None
        if isinstance(w.dataset, ShareGPTDataset):
            turns = sharegpt_turns(w.dataset.file, w.dataset.max_turns)
            turn = turns[i % len(turns)]
            messages = with_lead(turn.messages, self.text(LEAD_TOKENS, prompt_seed_of(self.seed, salt)))
            prompt = " ".join(content for _, content in messages)
            if w.dataset.output_tokens == "reply" and turn.reply_tokens is not None:
                max_tokens = turn.reply_tokens
            return prompt, len(prompt.split()), max_tokens, messages
        if isinstance(w.dataset, SharedPrefixDataset):
            d = w.dataset
            prefix = self.text(d.prefix_tokens, prompt_seed_of(self.seed, salt, self.phase_index, i % d.prefixes))
            question = self.text(draw(d.question_tokens, rng), prompt_seed)
            prompt = f"{prefix} {question}"
            return prompt, len(prompt.split()), max_tokens, (("system", prefix), ("user", question))
        return self.text(max(prompt_tokens - self.overhead, 1), prompt_seed), prompt_tokens, max_tokens, None

    def _more_texts(self, first: str, tokens: int, seed: int) -> tuple[str, ...]:
        """A request's texts where it carries `inputs` of them (an embeddings batch): `first`, then each its
        own seed, of the same length; none where it carries one."""
        if self.inputs == 1:
            return ()
        more = (self.text(max(tokens - self.overhead, 1), prompt_seed_of(seed, j)) for j in range(1, self.inputs))
        return (first, *more)

    def take(self, count: int) -> list[RequestSpec]:
        return [self.spec(i) for i in range(count)]

    def lazy(self, count: int) -> LazySpecs:
        return LazySpecs(self.spec, range(count))


class LazySpecs(Sequence[RequestSpec]):
    """The specs `build(j)` for each j of `indices`, each built only when asked for: a long trace's prompts
    are not all held in memory before the first request is even sent, and a shard's share of them (every
    N-th index) stays as lazy."""

    def __init__(self, build: Callable[[int], RequestSpec], indices: range) -> None:
        self._build, self._indices = build, indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, i: int) -> RequestSpec: ...

    @overload
    def __getitem__(self, i: slice) -> list[RequestSpec]: ...

    def __getitem__(self, i: int | slice) -> RequestSpec | list[RequestSpec]:
        if isinstance(i, slice):
            return [self._build(j) for j in self._indices[i]]
        return self._build(self._indices[i])  # range indexing raises IndexError past either end

    def __iter__(self) -> Iterator[RequestSpec]:
        return map(self._build, self._indices)


LEAD_TOKENS = 4  # a dataset's fixed texts get a per-run lead of this many tokens (980⁴ ≈ 10¹² leads)


def prompt_seed_of(*parts: int) -> int:
    return int(np.random.SeedSequence([0x5A5E, *parts]).generate_state(1)[0])


def with_lead(messages: tuple[Message, ...], lead: str) -> tuple[Message, ...]:
    """The conversation with `lead` opening its first message: every turn of it in this run shares the lead
    (multi-turn reuse within the run stays), and no other run's cache matches from its first token."""
    (role, content), *rest = messages
    return ((role, f"{lead} {content}"), *rest)


@functools.lru_cache(maxsize=8192)
def _block_text(hash_id: int, salt: tuple[int, int]) -> str:
    return make_text(MOONCAKE_BLOCK_TOKENS, prompt_seed_of(hash_id, *salt))


def prompt_from_blocks(hash_ids: tuple[int, ...], num_tokens: int, salt: tuple[int, int] = (0, 0)) -> str:
    """A prompt of `num_tokens` words made of one fixed 512-word block per prefix-block id.

    Requests that share leading block ids share a prompt prefix word for word, so a server with
    prefix caching sees exactly the reuse the trace recorded.
    """
    full, rest = divmod(num_tokens, MOONCAKE_BLOCK_TOKENS)
    parts = [_block_text(h, salt) for h in hash_ids[:full]]
    missing = num_tokens - len(parts) * MOONCAKE_BLOCK_TOKENS
    if missing and len(hash_ids) > len(parts):  # the last block is partial: its first words
        tail = _block_text(hash_ids[len(parts)], salt).split(" ", rest)[:rest]
        parts.append(" ".join(tail))
        missing -= len(tail)
    if missing > 0:  # fewer ids than the length needs
        parts.append(make_text(missing, prompt_seed_of(zlib.crc32(repr(hash_ids).encode()), *salt)))
    return " ".join(p for p in parts if p)
