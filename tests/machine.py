"""How busy the machine was with other processes while a test ran: what a timing test needs to know before its
failure can mean anything.

The same readings the harness's self-check takes (Linux /proc): the machine's busy CPU time (/proc/stat),
less the CPU time of this test process and every process it started (the simulator, a worker, a `harness run`
subprocess: they are the test's own load), over the wall time, in cores. Another process holding half a core
or more on average — a compiler, another test suite, a busy loop — is enough to delay a 10 ms timer or a
token's delivery by more than the tests' bounds on a 2-core machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

BUSY_CORES = 0.25  # other processes' average use, in cores, past which a timing result is not judged
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_ticks() -> int | None:
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return user + nice + system + irq + softirq + steal


def _processes() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, CPU ticks of it and of its children it has waited for)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        ppid, utime, stime, cutime, cstime = int(fields[1]), *(int(v) for v in fields[11:15])
        out[int(entry.name)] = (ppid, utime + stime + cutime + cstime)
    return out


def _own_ticks() -> int:
    """CPU ticks of this process and of every process descended from it, alive or waited for."""
    procs = _processes()
    mine, total = {os.getpid()}, 0
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    for pid in mine:
        total += procs.get(pid, (0, 0))[1]
    return total


@dataclass(frozen=True, slots=True)
class Reading:
    wall_s: float
    busy: int | None
    own: int


def read() -> Reading:
    return Reading(time.monotonic(), _machine_busy_ticks(), _own_ticks())


def others_cores(before: Reading, after: Reading) -> float | None:
    """Cores other processes held on average between two readings (None: not Linux, or no time passed)."""
    seconds = after.wall_s - before.wall_s
    if before.busy is None or after.busy is None or seconds <= 0.05:
        return None
    others = (after.busy - before.busy) - (after.own - before.own)
    return max(others, 0) / _TICK / seconds


def verdict(before: Reading, after: Reading) -> str | None:
    """Why a timing result cannot be judged, or None when the machine was quiet enough."""
    held = others_cores(before, after)
    if held is None or held < BUSY_CORES:
        return None
    return (f"machine too busy to judge timing: other processes held {held:.1f} of {os.cpu_count()} cores on "
            f"average during the test (the bound is {BUSY_CORES})")


@contextmanager
def judging(what: str) -> Iterator[None]:
    """A timed stretch inside a longer test (one night of a week of them): an assertion that fails in it while
    other processes held the cores is a skip with the reason, as a whole `timing` test's would be — judged over
    the stretch itself, so a burst of load during it is not averaged away over the rest of the test."""
    before = read()
    try:
        yield
    except AssertionError as exc:
        busy = verdict(before, read())
        if busy is None:
            raise
        first = str(exc).splitlines()[0][:200] if str(exc) else "(no message)"
        pytest.skip(f"{busy} ({what}); it failed with: {first}")


def busy_elsewhere(seconds: float) -> None:
    """A busy loop for `seconds` that is no process's child here (its parent, a shell, exits at once): another
    process's load, as a compiler or another suite beside the tests would be."""
    shell = subprocess.run(["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                           capture_output=True, text=True, check=True)
    pid = int(shell.stdout.strip())
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGKILL)
