"""Where a phase's stress landed: memory- or compute-bound, and how much of the device's peak bandwidth (MBU)
and arithmetic (MFU) it used.

Read from the bundled simulator's account of its steps (its `sim:` series, scraped like any server's). Pure:
scraped rows and a time window in, a `Stress` out.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.stats.schema import Stress
from harness.stats.server import Row, counter_rate, gauge

SIMULATOR_BASIS = "the simulator's roofline account of every step (sim: metrics)"


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def account(memory_s: float, compute_s: float, read_bytes: float | None, flops: float | None, window_s: float,
            peaks: tuple[float | None, float | None], basis: str = SIMULATOR_BASIS) -> Stress | None:
    """The stress of `window_s` seconds in which the engine stepped `memory_s` + `compute_s` seconds, reading
    `read_bytes` and doing `flops`, on a device of `peaks` (bytes/s, FLOP/s)."""
    busy = memory_s + compute_s
    if busy <= 0 or window_s <= 0:
        return None
    peak_bytes, peak_flops = peaks
    return Stress(source="simulator", basis=basis, memory_bound_share=memory_s / busy, busy_share=busy / window_s,
                  mbu=_share(read_bytes, None if peak_bytes is None else busy * peak_bytes),
                  mfu=_share(flops, None if peak_flops is None else busy * peak_flops))


def from_simulator(rows: Sequence[Row], start_ns: int, end_ns: int) -> Stress | None:
    """The phase's stress from the simulator's counters over [start, end]; None from any other server."""
    rates = [counter_rate(rows, name, start_ns, end_ns) for name in
             ("memory_bound_seconds_total", "compute_bound_seconds_total", "hbm_read_bytes_total", "flops_total")]
    memory, compute, read, done = rates
    if memory is None or compute is None:
        return None
    peaks = gauge(rows, "peak_hbm_bytes_per_second")[0], gauge(rows, "peak_flops_per_second")[0]
    return account(memory, compute, read, done, 1.0, peaks)  # rates: one second's worth
