"""Starts the bundled simulator as a child process on a free loopback port, and mounts its commands.

A separate process, so the simulator never competes with the harness for its event loop; the
two share nothing but HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import os
import signal
import sys
from collections.abc import AsyncIterator

import click

from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.errors import ScenarioError, SimulatorError
from harness.voice import Voice

_START_TIMEOUT_S = 30.0


def simulator_cli() -> click.Group:
    """`harness sim`: the simulator's own commands, which the bundled process runs too."""
    from harness.sim.cli import sim

    return sim


def check_fits(cfg: SimulatorConfig) -> None:
    """A simulator that could serve nothing is a scenario mistake, named before anything starts (`predict`,
    which runs the simulator in this process; the bundled one checks itself and says so on its first line)."""
    from harness.sim.deployment import deployment_problem

    problem = deployment_problem(cfg)
    if problem is not None:
        raise ScenarioError(f"simulator: {problem}")


def simulator_command(cfg: SimulatorConfig, host: str = "127.0.0.1", port: int = 0) -> list[str]:
    # A fitted twin, custom devices: the files this process loaded (that are still there to load).
    presets = [arg for path in catalogue().files_here() for arg in ("--presets", str(path))]
    return [sys.executable, "-m", "harness", "sim", "serve", "--host", host, "--port", str(port), *presets,
            "--config-json", cfg.model_dump_json()]


# The cores this process was given, read once: after pinning itself, its own affinity is one core.
_GIVEN_CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def given_cores() -> list[int]:
    """The cores this process was given at start (before any pinning of its own)."""
    return list(_GIVEN_CORES)


def split_cores() -> tuple[set[int], set[int]] | None:
    """(harness cores, simulator cores) when this process was given two or more: first core, last core."""
    cores = _GIVEN_CORES
    return ({cores[0]}, {cores[-1]}) if len(cores) >= 2 else None


def pin_process(cores: set[int]) -> None:
    """Pin every thread of this process (numpy's BLAS threads included), not only the calling one."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread may have ended meanwhile
            os.sched_setaffinity(int(tid), cores)


_PR_SET_PDEATHSIG = 1


def _child_setup(cores: set[int] | None) -> None:
    """In the child, before it execs: die with the harness, and take the simulator's core."""
    # Even a kill -9 of the harness must not leave a simulator holding its port: the kernel sends SIGTERM
    # to the child when the parent dies (Linux; elsewhere this is a no-op and the exit path still stops it).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if cores is not None:
        os.sched_setaffinity(0, cores)  # before exec, so every thread it starts inherits its core


@contextlib.asynccontextmanager
async def bundled_simulator(cfg: SimulatorConfig, pin: bool = False,
                            voice: Voice | None = None) -> AsyncIterator[tuple[str, str]]:
    """Yields (base URL, model name) of a running simulator; stops it on exit.

    With `pin`, the harness keeps the first core and the simulator gets the last, so neither
    steals the other's time slices and the harness's own timing stays honest. With `voice`, each line
    the simulator writes to stderr goes there instead of straight to the terminal, where it would
    land in the middle of a live display.
    """
    cores = split_cores() if pin else None
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # the simulator does no BLAS
    proc = await asyncio.create_subprocess_exec(
        *simulator_command(cfg), stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, env=env,
        stderr=None if voice is None else asyncio.subprocess.PIPE,
        preexec_fn=functools.partial(_child_setup, None if cores is None else cores[1]),
        # Its own process group: a Ctrl-C at the terminal reaches the harness, which stops the simulator
        # itself once the records are safe, instead of the simulator dying (and printing) mid-run.
        start_new_session=True,
    )
    if cores is not None:
        pin_process(cores[0])
    relay = None if voice is None or proc.stderr is None else asyncio.ensure_future(_relay(proc.stderr, voice))
    try:
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), _START_TIMEOUT_S)
            info = json.loads(line)
        except (TimeoutError, ValueError):
            raise SimulatorError("the bundled simulator did not start") from None
        if "refused" in info:  # it checks its own configuration starts, as vLLM would: a scenario mistake
            raise ScenarioError(f"simulator: {info['refused']}")
        yield info["url"], info["model"]
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if relay is not None:
            await relay  # the pipe closed with the process: what it said last is said too


async def _relay(stream: asyncio.StreamReader, voice: Voice) -> None:
    """Every line of the simulator's stderr to `voice`, until it closes (read always: a full pipe would stall
    it)."""
    while line := await stream.readline():
        voice.warn(line.decode(errors="replace").rstrip())
