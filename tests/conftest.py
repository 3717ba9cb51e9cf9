from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.helpers import NO_TRACES, SHARED_TRACES


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


_skipped_for_traces: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and NO_TRACES in str(report.longrepr):
        _skipped_for_traces.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI, a test skipped for want of the shared traces is a failure: CI must run them all."""
    if _skipped_for_traces and os.environ.get("CI") == "true":
        print(f"\nCI: {len(_skipped_for_traces)} tests skipped for want of the shared traces ({SHARED_TRACES}); "
              "failing the run")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
