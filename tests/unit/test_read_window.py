"""`ReadWindow`'s rule: at most one nap a loop pass, of the window; none for the first reads after an idle spell."""

from __future__ import annotations

import asyncio
import time

from harness.client.read_window import ReadWindow


async def test_reads_in_one_pass_share_one_nap_of_the_window() -> None:
    window = ReadWindow(0.05)
    start = time.perf_counter()
    window.touch()
    window.touch()  # a second read in the same pass
    await asyncio.sleep(0)  # the pass ends: the nap runs before the loop polls again
    await asyncio.sleep(0)
    assert window.naps == 1
    assert time.perf_counter() - start >= 0.04  # a sleep never ends early; only a late one could pass this


async def test_the_first_read_after_an_idle_spell_is_not_held() -> None:
    window = ReadWindow(0.01)
    await asyncio.sleep(0.02)  # longer than the window since the last poll
    window.touch()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert window.naps == 0
