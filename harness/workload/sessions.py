"""Multi-turn conversations: what each turn asks, when it may be sent, and the request it becomes. Pure.

A conversation's turns are known up front (a ShareGPT conversation's human messages, a trace's rows of one
session, or N synthetic messages), but each turn's history is not: it holds the answers the server actually
gave, so a turn's request is built only when the previous answer has ended (`spec`). Think times are drawn
per turn from the scenario's seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.clock import NS_PER_S
from harness.config.workload import Sessions, ShareGPTDataset, ThinkTime
from harness.workload.datasets import Message, sharegpt_conversations
from harness.workload.lengths import draw
from harness.workload.requests import LEAD_TOKENS, RequestSource, RequestSpec, prompt_seed_of, with_lead
from harness.workload.traces import TraceRow

TURN_STRIDE = 1000  # a turn's index: conversation × 1000 + turn (Sessions.max_turns ≤ 1000)


@dataclass(frozen=True, slots=True)
class Ask:
    """One turn before its history is known: the user's new message and the answer length asked for."""

    text: str
    max_tokens: int


@dataclass(frozen=True, slots=True)
class Conversation:
    index: int
    session: str
    turns: tuple[Ask, ...]
    opening: tuple[Message, ...] = ()  # what precedes the first user message (a system prompt): the first history


def group_sessions(rows: Sequence[TraceRow]) -> list[tuple[TraceRow, ...]]:
    """A trace's rows by session, in order of each session's first arrival (rows without one stand alone)."""
    groups: dict[str, list[TraceRow]] = {}
    for n, row in enumerate(rows):
        groups.setdefault(row.session if row.session is not None else f"row-{n}", []).append(row)
    return sorted((tuple(g) for g in groups.values()), key=lambda g: g[0].arrival_s)


def new_tokens(rows: tuple[TraceRow, ...], k: int) -> int:
    """A trace turn's new user tokens: its context less the previous turn's context and answer."""
    if k == 0:
        return max(rows[0].input_tokens, 1)
    before = rows[k - 1]
    return max(rows[k].input_tokens - before.input_tokens - before.output_tokens, 1)


@dataclass(frozen=True, slots=True)
class ConversationSource:
    source: RequestSource  # the phase's workload, seeds, prompt salt and text maker
    sessions: Sessions
    trace_sessions: tuple[tuple[TraceRow, ...], ...] | None = None

    def conversation(self, i: int) -> Conversation:
        src, w = self.source, self.source.workload
        rng = np.random.default_rng([src.seed, i, 7])
        opening: tuple[Message, ...] = ()
        if self.trace_sessions is not None:
            rows = self.trace_sessions[i][: self.sessions.max_turns]
            asks = [Ask(self._text(new_tokens(rows, k), i, k), max(r.output_tokens, 1)) for k, r in enumerate(rows)]
            session = rows[0].session or f"{i}"
        elif isinstance(w.dataset, ShareGPTDataset):
            convs = sharegpt_conversations(w.dataset.file)
            turns = convs[i % len(convs)][: min(self.sessions.max_turns, w.dataset.max_turns or 1000)]
            asks = [Ask(t.messages[-1][1], t.reply_tokens if w.dataset.output_tokens == "reply" and t.reply_tokens
                        else draw(w.output_tokens, rng)) for t in turns]
            opening = turns[0].messages[:-1]
            session = f"{i}"
        else:
            count = min(self.sessions.turns or 1, self.sessions.max_turns)
            asks = [Ask(self._text(draw(w.prompt_tokens, rng), i, k), draw(w.output_tokens, rng))
                    for k in range(count)]
            session = f"{i}"
        # The per-run lead opens the conversation: no other run's prompt cache matches its first token.
        lead = src.text(LEAD_TOKENS, prompt_seed_of(src.seed, src.salt, i))
        if opening:
            opening = with_lead(opening, lead)
        else:
            asks[0] = Ask(f"{lead} {asks[0].text}", asks[0].max_tokens)
        return Conversation(i, f"{src.run_id}-{src.phase_index}-s{session}", tuple(asks), opening)

    def turns(self, i: int) -> int:
        """How many turns conversation i has (each one request), known without building its text."""
        if self.trace_sessions is not None:
            return len(self.trace_sessions[i][: self.sessions.max_turns])
        w = self.source.workload
        if isinstance(w.dataset, ShareGPTDataset):
            convs = sharegpt_conversations(w.dataset.file)
            return len(convs[i % len(convs)][: min(self.sessions.max_turns, w.dataset.max_turns or 1000)])
        return min(self.sessions.turns or 1, self.sessions.max_turns)

    def _text(self, tokens: int, i: int, k: int) -> str:
        return self.source.text(tokens, prompt_seed_of(self.source.seed, self.source.salt, i, k, 1))

    def think_ns(self, i: int, k: int) -> int:
        """The pause before turn k (k ≥ 1) of conversation i."""
        think = self.sessions.think_s
        if not isinstance(think, ThinkTime):
            return int(think * NS_PER_S)
        rng = np.random.default_rng([self.source.seed, i, k, 11])
        if think.dist == "fixed":
            value = think.value_s or 0.0
        elif think.dist == "exponential":
            value = rng.exponential(think.mean_s or 0.0)
        elif think.dist == "uniform":
            value = rng.uniform(think.min_s, think.max_s or think.min_s)
        else:
            value = rng.lognormal(np.log(think.median_s or 1.0), think.sigma or 0.0)
        return int(value * NS_PER_S)

    def spec(self, conv: Conversation, k: int, history: tuple[Message, ...]) -> RequestSpec:
        """Turn k with the conversation so far (the real answers included) as its history."""
        ask = conv.turns[k]
        messages = (*history, ("user", ask.text))
        prompt = " ".join(content for _, content in messages)
        src = self.source
        return RequestSpec(
            request_id=f"{src.run_id}-{src.phase_index}-{conv.index}.{k}", phase=src.phase,
            index=conv.index * TURN_STRIDE + k, prompt=prompt, prompt_tokens=len(prompt.split()),
            max_tokens=ask.max_tokens, ignore_eos=src.workload.ignore_eos, messages=messages,
            session=conv.session, turn=k,
        )
