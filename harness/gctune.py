"""Settings for processes that keep time (the harness and the simulator): the garbage collector, the GIL,
and helper threads that must not hold up the event loop.

A full collection over hundreds of thousands of live objects (records, token timestamps) stops
the event loop for milliseconds, which shows up as schedule lag in the harness and as step
lateness in the simulator. Objects alive at start-up are frozen out of the collector's view,
and young collections run less often; reference counting still frees almost everything.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

# A thread that wants the GIL waits this long before the holder is asked to let go (CPython's default is
# 5 ms): the event loop, woken for a deadline, then waits at most this long for the request-building thread.
SWITCH_INTERVAL_S = 1e-4


def tune_for_timing(young: int = 100_000) -> None:
    """Freeze what is alive now; collect the young generation after `young` new container objects; hand
    the GIL between threads within a tenth of a millisecond.

    A young collection costs about 0.1–0.2 µs per object, so the threshold trades how often the loop
    stops against how long.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, 50, 1000)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def yield_cpu() -> None:
    """The calling thread runs only when its core has nothing else to run (Linux's SCHED_IDLE; elsewhere the
    lowest priority): a helper thread on the event loop's core never delays the loop's wake-up."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # pid 0: this thread, on Linux
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, 0, 19)
