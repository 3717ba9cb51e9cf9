"""Sessions: conversations arriving open loop; within each, a turn leaves when the previous answer has ended plus
a think time, carrying the real answers as its history."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from harness.run.pacers import Sender
from harness.workload.datasets import Message
from harness.workload.sessions import ConversationSource


async def pace(sender: Sender, source: ConversationSource, offsets_ns: Sequence[int],
               conversations: Sequence[int]) -> None:
    """Conversation `conversations[j]` starting at `offsets_ns[j]` from now; stopped, no further turn starts."""
    start = sender.clock.now_ns()
    talks: list[asyncio.Task[None]] = []
    try:
        for i, offset in zip(conversations, offsets_ns, strict=True):
            deadline = start + int(offset)
            await sender.clock.sleep_until(deadline)
            talks.append(asyncio.ensure_future(_conversation(sender, source, i, deadline)))
        await asyncio.gather(*talks)
    finally:  # turns in flight get the grace period
        for talk in talks:
            talk.cancel()


async def _conversation(sender: Sender, source: ConversationSource, i: int, arrival_ns: int) -> None:
    conv = source.conversation(i)
    history: tuple[Message, ...] = conv.opening
    intended = arrival_ns
    for k in range(len(conv.turns)):
        spec = source.spec(conv, k, history)
        sender.backend.prepare(spec)
        await sender.clock.sleep_until(intended)
        answer: list[str] = []
        task = sender.launch(spec, intended, answer)
        await asyncio.wait({task})
        rec = task.result()
        if rec.status != "ok":  # no answer to build on: the user leaves
            return
        history = (*(spec.messages or ()), ("assistant", "".join(answer)))
        intended = rec.end_ns + source.think_ns(i, k + 1)
