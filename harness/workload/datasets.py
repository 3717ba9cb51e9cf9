"""Prompt datasets: ShareGPT conversations (multi-turn, history included) and synthetic shared prefixes.

Each yields `Turn`s: the chat messages of one request and, when the dataset records one, the length
of the answer. Token counts use the shared tokenizer (one token per word).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from harness.doors import json_value, valid_text
from harness.errors import TraceError
from harness.limits import DATASET_BYTES

Message = tuple[str, str]  # (role, content)


@dataclass(frozen=True, slots=True)
class Turn:
    messages: tuple[Message, ...]
    reply_tokens: int | None = None
    conversation: int = 0  # which conversation of the file it belongs to

    @property
    def prompt(self) -> str:
        return " ".join(content for _, content in self.messages)


_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "assistant": "assistant",
          "bing": "assistant", "bard": "assistant", "system": "system"}


@functools.lru_cache(maxsize=4)
def sharegpt_turns(path: str, max_turns: int | None = None) -> tuple[Turn, ...]:
    """Every human turn of every conversation, in order, with the conversation so far as history.

    Consecutive turns of one conversation share their whole history, so a server with prefix
    caching sees multi-turn reuse. Conversations that do not start with a human turn are skipped.
    """
    try:
        data = json_value(Path(path).read_bytes(), DATASET_BYTES)
    except (OSError, ValueError) as exc:
        raise TraceError(f"{path}: not a ShareGPT JSON file ({exc})") from None
    if not isinstance(data, list):
        raise TraceError(f"{path}: a ShareGPT file is a JSON list of conversations")
    turns: list[Turn] = []
    for n, conv in enumerate(data):
        messages = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(messages, list):
            raise TraceError(f"{path}: conversation {n} has no 'conversations' list")
        history: list[Message] = []
        taken = 0
        for k, msg in enumerate(messages):
            role = _ROLES.get(str(msg.get("from", "")).lower()) if isinstance(msg, dict) else None
            text = msg.get("value") if isinstance(msg, dict) else None
            if role is None or not isinstance(text, str):
                raise TraceError(f"{path}: conversation {n}, message {k}: needs 'from' and 'value'")
            text = valid_text(text)
            if role == "user" and text.split():
                reply = messages[k + 1].get("value") if k + 1 < len(messages) else None
                reply_tokens = len(reply.split()) if isinstance(reply, str) and reply.split() else None
                turns.append(Turn((*history, (role, text)), reply_tokens, n))
                taken += 1
                if max_turns is not None and taken >= max_turns:
                    break
            history.append((role, text))
    if not turns:
        raise TraceError(f"{path}: no human turns")
    return tuple(turns)


@functools.lru_cache(maxsize=4)
def sharegpt_conversations(path: str) -> tuple[tuple[Turn, ...], ...]:
    """The human turns of every conversation, grouped by conversation (for multi-turn sessions)."""
    conversations: dict[int, list[Turn]] = {}
    for turn in sharegpt_turns(path):
        conversations.setdefault(turn.conversation, []).append(turn)
    return tuple(tuple(c) for c in conversations.values())

