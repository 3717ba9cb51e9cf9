"""An opt-in bound on how often the lean client polls its sockets (`client.read_window_us`), for ceiling runs.

When the client keeps up with a server that writes each token on its own, every write wakes it: one epoll call
and one read, ~5 µs of Python and kernel, per token (docs/benchmarks.md, issue 48). Sleeping the rest of a short
window after each batch of reads lets the tokens of every stream pile up in the kernel, to be taken in fewer,
fuller reads: on 64 streams at zero delay, 4.1–5.1 µs a token against 5.1–6.1 µs. The price is time: a token is
stamped when it is read, so each stamp (TTFT, ITL, end) may be up to the window (plus the kernel's timer slack)
late, and a send due in a nap leaves as late. Off by default; the run's header says when it was on.
"""

from __future__ import annotations

import asyncio
import time


class ReadWindow:
    """Polls at most once every `window_s` while data arrives; idle, the loop blocks as usual."""

    __slots__ = ("_last", "_pending", "naps", "window_s")

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._pending = False
        self._last = time.perf_counter()  # when the loop last went back to its poll
        self.naps = 0

    def touch(self) -> None:
        """Data was read: before the loop polls again, the rest of the window is slept (once per loop pass)."""
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._nap)

    def _nap(self) -> None:
        self._pending = False
        rest = self._last + self.window_s - time.perf_counter()
        if rest > 0:
            time.sleep(rest)
            self.naps += 1
        self._last = time.perf_counter()
