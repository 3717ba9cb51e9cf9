"""Ctrl-C, SIGTERM, SIGQUIT and SIGHUP during a run: the first stops sending and lets requests in flight
finish within the grace period; the second cancels them at once. Either way every record taken is kept.
SIGUSR1 (which would end a process unhandled) is said and ignored.

SIGHUP is the terminal going away (an ssh session dropped): the run ends as on SIGTERM, but first its output
is sent to /dev/null — a write to a hung-up terminal fails, and must not cost the summary.

After the run, while its statistics and reports are made (`results_kept`, the CLI's), a signal is said and
held off: one more abandons them. Without it an impatient second Ctrl-C landed there and left no summary."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from types import FrameType

from harness.run.dispatch import Dispatcher
from harness.voice import Voice

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP)
USR1_IGNORED = "SIGUSR1: ignored, the run goes on (Ctrl-C or SIGTERM stop it, records kept)"
_keeping: list[Voice] = []  # inside `results_kept`: who is told of a signal held off


class Stopper:
    def __init__(self, dispatcher: Dispatcher, voice: Voice) -> None:
        self.dispatcher = dispatcher
        self.voice = voice
        self.signal: str | None = None
        self.at_ns: int | None = None  # when the first signal came (time.monotonic_ns, the run's clock)
        self.cancelled = False  # the second signal came: requests in flight were cancelled
        self._main = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._installed: Installed = {}

    def install(self) -> None:
        self._installed = on_signals(self._loop, self._on_signal)

    def remove(self) -> None:
        off_signals(self._loop, self._installed)
        self._installed = {}

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            detach_terminal()
        if sig == signal.SIGUSR1:
            self.voice.warn(USR1_IGNORED)
        elif self.signal is None:
            self.signal = sig.name
            self.at_ns = time.monotonic_ns()
            self.voice.warn(f"{sig.name}: stopped sending; waiting for requests in flight (again to cancel them)")
            self.dispatcher.stop()
        elif self._main is not None and not self.cancelled:
            self.cancelled = True
            self._main.cancel()


Installed = dict[signal.Signals, object]  # each signal handled on a loop, and its handler before


def on_signals(loop: asyncio.AbstractEventLoop, handler: Callable[[signal.Signals], None]) -> Installed:
    """`handler` for the stopping signals and SIGUSR1 on `loop`; the ones installed, with their handlers
    before."""
    installed: Installed = {}
    for sig in (*STOPPING, signal.SIGUSR1):
        before = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, handler, sig)
            installed[sig] = before
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or no signals on this platform: nothing to install
    return installed


def off_signals(loop: asyncio.AbstractEventLoop, installed: Installed) -> None:
    """The loop's handlers off, and the ones before back (the loop would leave the defaults); within
    `results_kept`, signals are held off instead while the results are made."""
    for sig, before in installed.items():
        loop.remove_signal_handler(sig)
        signal.signal(sig, _held if _keeping else before)  # type: ignore[arg-type]


@contextlib.contextmanager
def results_kept(voice: Voice) -> Iterator[None]:
    """Around a command's runs and their reports: after each run, a signal is held off until its results are
    written (said; one more abandons them). The handlers in place before are back at the end."""
    before = {sig: signal.getsignal(sig) for sig in (*STOPPING, signal.SIGUSR1)}
    _keeping.append(voice)
    _held.said = False
    try:
        yield
    finally:
        _keeping.pop()
        for sig, handler in before.items():
            signal.signal(sig, handler)


class _Hold:
    """The handler while a run's results are made: the first stopping signal is said, the next abandons
    them."""

    said = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        if sig == signal.SIGHUP:
            detach_terminal()
            return
        if sig == signal.SIGUSR1 or not self.said:
            self.said = self.said or sig != signal.SIGUSR1
            for voice in _keeping[-1:]:
                voice.warn(f"{sig.name}: the run has ended and its results are being written (again to abandon them)")
            return
        raise KeyboardInterrupt


_held = _Hold()


def detach_terminal() -> None:
    """stdout and stderr to /dev/null, as `nohup` would have set them: the terminal is gone."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
