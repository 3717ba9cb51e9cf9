"""Ctrl-C, SIGTERM and SIGHUP during a run: the first stops sending and lets requests in flight finish within
the grace period; the second cancels them at once. Either way every record taken is kept.

SIGHUP is the terminal going away (an ssh session dropped): the run ends as on SIGTERM, but first its output is
sent to /dev/null — a write to a hung-up terminal fails, and must not cost the summary."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable

from harness.run.dispatch import Dispatcher

Warn = Callable[[str], None]


class Stopper:
    def __init__(self, dispatcher: Dispatcher, warn: Warn) -> None:
        self.dispatcher = dispatcher
        self.warn = warn
        self.signal: str | None = None
        self.at_ns: int | None = None  # when the first signal came (time.monotonic_ns, the run's clock)
        self.cancelled = False  # the second signal came: requests in flight were cancelled
        self._main = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._installed: list[signal.Signals] = []

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._loop.add_signal_handler(sig, self._on_signal, sig)
                self._installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or no signals on this platform: nothing to install

    def remove(self) -> None:
        for sig in self._installed:
            self._loop.remove_signal_handler(sig)
        self._installed = []

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            detach_terminal()
        if self.signal is None:
            self.signal = sig.name
            self.at_ns = time.monotonic_ns()
            self.warn(f"{sig.name}: stopped sending; waiting for requests in flight (again to cancel them)")
            self.dispatcher.stop()
        elif self._main is not None and not self.cancelled:
            self.cancelled = True
            self._main.cancel()


def detach_terminal() -> None:
    """stdout and stderr to /dev/null, as `nohup` would have set them: the terminal is gone."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
