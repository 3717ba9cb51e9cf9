"""An opt-in pause of the lean client between passes of reads (`client.read_window_us`), for ceiling runs.

When the client keeps up with a server that writes each token on its own, every write wakes it: one epoll call
and one read, ~5 µs of Python and kernel, per token (docs/benchmarks.md, issue 48). Sleeping a short window
after each loop pass that read something lets the tokens of every stream pile up in the kernel meanwhile, to
be taken in fewer, fuller reads: on 64 streams at zero delay, 300 µs took 4–19% off the client's CPU a token.
Sleeping only the rest of a window since the last poll took nothing off: a busy pass already lasts about that
long. The price is time: a token is stamped when it is read, so each stamp (TTFT, ITL, end) may be up to the
window plus one loop pass (and the kernel's timer slack) late, and a send due in a nap leaves as late. Off by
default; the run's header says when it was on.
"""

from __future__ import annotations

import asyncio
import time


class ReadWindow:
    """Sleeps `window_s` after each loop pass that read data, before the loop polls again; the first reads
    after an idle spell longer than the window are not held, and idle, the loop blocks as usual."""

    __slots__ = ("_last", "_pending", "naps", "window_s")

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._pending = False
        self._last = time.perf_counter()  # when the loop last went back to its poll
        self.naps = 0

    def touch(self) -> None:
        """Data was read: before the loop polls again, the window is slept (once per loop pass)."""
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._nap)

    def _nap(self) -> None:
        self._pending = False
        if time.perf_counter() - self._last < self.window_s:  # else: the first reads after an idle spell
            time.sleep(self.window_s)
            self.naps += 1
        self._last = time.perf_counter()
