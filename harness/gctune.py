"""Garbage-collector settings for processes that keep time (the harness and the simulator).

A full collection over hundreds of thousands of live objects (records, token timestamps) stops
the event loop for milliseconds, which shows up as schedule lag in the harness and as step
lateness in the simulator. Objects alive at start-up are frozen out of the collector's view,
and young collections run less often; reference counting still frees almost everything.
"""

from __future__ import annotations

import gc


def tune_for_timing() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
