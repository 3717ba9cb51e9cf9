"""The self-check names the right side, measured for real: a CPU hog on the harness's core makes it "not
scheduled", a zero-delay server makes it "saturated", and the live warning says what the verdict says.
The simulator runs on the other core; both loads are bounded (a few seconds, a few hundred requests)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.run.display import Display
from harness.run.result import RunResult
from harness.run.runner import run_scenario
from tests.helpers import serving

pytestmark = [pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores: harness and server apart"),
              pytest.mark.timing]  # the verdicts are readings of this machine's CPU
HOG = "import time\nend = time.time() + 12\nwhile time.time() < end:\n    pass\n"


@contextmanager
def on_core(core: int) -> Iterator[None]:
    """This process (the harness under test) on one core, for the length of the block."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextmanager
def simulator(core: int, *flags: str) -> Iterator[str]:
    with serving("sim", "serve", "--port", "0", "--timing", "fixed", *flags,
                 preexec_fn=lambda: os.sched_setaffinity(0, {core})) as url:
        yield url


@contextmanager
def hogs(core: int, count: int) -> Iterator[None]:
    """`count` busy loops on `core` (each ends by itself after 12 s; killed when the block ends)."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG], preexec_fn=lambda: os.sched_setaffinity(0, {core}))
             for _ in range(count)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def _run(url: str, load: dict[str, object], workload: dict[str, object], tmp: Path,
               warnings: list[str], cpu_bound: float = 0.9) -> RunResult:
    scenario = parse_scenario({"name": "self", "workload": workload, "endpoint": {"scrape_interval_s": 0},
                               "client": {"cpu_bound": cpu_bound},
                               "phases": [{"name": "p", "load": load}]}, "test")
    display = Display()
    display.warn = warnings.append  # type: ignore[method-assign]
    return await run_scenario(scenario, Endpoint(url, "llama-3.1-8b"), tmp / "run", display=display)


async def test_a_hog_on_the_harness_core_is_named_not_scheduled(tmp_path: Path) -> None:
    warnings: list[str] = []
    with simulator(1, "--fixed-ttft-ms", "20", "--fixed-itl-ms", "5") as url, on_core(0), hogs(0, 3):
        result = await _run(url, {"type": "poisson", "rate": 100, "requests": 300},
                            {"prompt_tokens": 32, "output_tokens": 16}, tmp_path, warnings)
    (phase,) = result.summary.phases
    assert phase.client_limited and phase.client.verdict == "not_scheduled", phase.client_limited_reason
    assert phase.client.runq_share is not None and phase.client.runq_share > 0.25
    assert phase.client.cpu_share is not None and phase.client.cpu_share < 0.9
    # Whatever the live check said during the phase, it said the same thing.
    assert all(w.startswith("harness not scheduled") for w in warnings), warnings


async def test_a_zero_delay_server_saturates_the_harness(tmp_path: Path) -> None:
    warnings: list[str] = []
    with simulator(1, "--fixed-ttft-ms", "0", "--fixed-itl-ms", "0") as url, on_core(0):
        # A bound of 60% of a core: this machine's host sometimes takes a share of even a pinned core.
        result = await _run(url, {"type": "concurrency", "concurrency": 64, "requests": 400},
                            {"prompt_tokens": 16, "output_tokens": 256}, tmp_path, warnings, cpu_bound=0.6)
    (phase,) = result.summary.phases
    assert phase.client_limited and phase.client.verdict == "saturated", phase.client_limited_reason
    assert phase.client.cpu_share is not None and phase.client.cpu_share >= 0.6
    assert all(w.startswith("harness saturated") for w in warnings), warnings
