"""Open loop: every request at its absolute deadline (start + its offset), never "a gap after the last send",
which drifts and under-delivers the rate."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from harness.clock import NS_PER_S
from harness.run.lookahead import Lookahead
from harness.run.pacers import Sender

BUILD_MARGIN_S = 0.001  # what building a request here, when the worker is late, may take


async def pace(sender: Sender, feed: Lookahead, offsets_ns: Sequence[int], max_in_flight: int | None) -> None:
    """The requests of `feed` at `offsets_ns` from now; past `max_in_flight` in flight, each held until one ends
    (the hold is its `held_ns`: the cap's doing, told apart from the client's lateness)."""
    clock = sender.clock
    await feed.prime(len(offsets_ns))  # the first requests (to the lookahead's bound) ready before the start
    spec = await feed.next()
    start = clock.now_ns()
    released = start  # when the in-flight cap last let a held request go
    for k, offset in enumerate(offsets_ns):
        deadline = start + int(offset)
        if k:  # the worker has until this request is due (less a build's worth) to have it ready
            spec = await feed.next(max(0.0, (deadline - clock.now_ns()) / NS_PER_S - BUILD_MARGIN_S))
        assert spec is not None
        await clock.sleep_until(deadline)
        # The cap's doing, not the client's lateness: the wait for a free slot, and the time this request's turn
        # came while the sender was still held for an earlier one. Only waking later than that is late.
        woke = clock.now_ns()
        late = max(0, woke - max(deadline, released))
        in_flight = sender.in_flight
        if max_in_flight is not None and len(in_flight) >= max_in_flight:
            while len(in_flight) >= max_in_flight:
                await asyncio.wait(set(in_flight), return_when=asyncio.FIRST_COMPLETED)
            released = clock.now_ns()
        sender.launch(spec, deadline, held_ns=max(0, clock.now_ns() - deadline - late))
