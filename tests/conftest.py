from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests import machine


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    """A bundled simulator in its own process on a free loopback port (H100, Llama-3.1-8B)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "sim", "serve", "--host", "127.0.0.1", "--port", "0", "--seed", "3"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, "simulator did not start"
        yield json.loads(line)["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


# Timing tests: judged only on a machine quiet enough to judge them (tests/machine.py).
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "timing: checks timing; a failure while other processes held the machine's "
                                       "cores is reported as a skip, with the reason, not as a failure")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("timing") is None:
        yield
        return
    before = machine.read()
    yield
    item.stash[_BUSY] = machine.verdict(before, machine.read())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    busy = item.stash.get(_BUSY, None)
    if report.when == "call" and report.failed and busy is not None:
        crash = getattr(report.longrepr, "reprcrash", None)
        failure = crash.message.splitlines()[0][:200] if crash is not None and crash.message else "(no message)"
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"{busy}; it failed with: {failure}")


_BUSY = pytest.StashKey[str | None]()
