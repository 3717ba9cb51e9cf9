"""Closed loop: `concurrency` users, each sending its next request when its last one has ended (and a think
time has passed)."""

from __future__ import annotations

import asyncio

from harness.run.lookahead import Lookahead
from harness.run.pacers import Sender


async def pace(sender: Sender, feed: Lookahead, concurrency: int, think_ns: int, duration_ns: int | None,
               stagger_ns: int) -> None:
    """The users until `feed` runs out or `duration_ns` ends; their starts spread over `stagger_ns`."""
    clock = sender.clock
    await feed.prime(concurrency)  # every user's first request is ready before the phase's clock starts
    start = clock.now_ns()
    end = None if duration_ns is None else start + duration_ns

    async def user(i: int) -> None:
        if stagger_ns:
            await clock.sleep_until(start + stagger_ns * i // concurrency)
        while True:
            now = clock.now_ns()  # the user's turn: what keeps the request from leaving now is lag
            if end is not None and now >= end:
                return
            spec = await feed.next()  # the shared feed hands each request to exactly one user
            if spec is None:
                return
            await asyncio.wait({sender.launch(spec, now)})
            if think_ns:
                await clock.sleep_until(clock.now_ns() + think_ns)

    users = [asyncio.ensure_future(user(i)) for i in range(concurrency)]
    try:
        await asyncio.gather(*users)
    finally:
        for u in users:
            u.cancel()
