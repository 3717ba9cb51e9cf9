from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests import machine


@pytest.fixture(autouse=True)
def _catalogue_kept() -> Iterator[None]:
    """A test that loads presets or adds a device does it to the catalogue it then uses; the next test starts from
    the one before."""
    from harness.devices.catalogue import catalogue, use

    before = catalogue()
    yield
    use(before)


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    """A bundled simulator in its own process on a free loopback port (H100, Llama-3.1-8B)."""
    # Spelled out, not tests.helpers.serving: tests of this conftest copy it where the helpers are not.
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
    config.addinivalue_line("markers", "pairs: a timing test whose bounds hold with one other such test running "
                                       "beside it (`make check` runs these two at once; the rest of the timing tests "
                                       "alone)")


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


# How many timing tests were judged, and how many a busy machine skipped: said at the end of every run, and a CI
# run (CI set) where every one of them skipped fails — a suite that judged no timing at all proves nothing.
_TIMING: dict[str, int] = {"judged": 0, "skipped": 0}


_FUZZED: dict[str, int] = {}  # inputs each reader of outside input took (tests/unit/test_fuzz_readers.py)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:  # reported by xdist's workers too
        if key == "fuzz_inputs" and report.when == "call":
            name, _, count = str(value).rpartition("=")
            _FUZZED[name] = _FUZZED.get(name, 0) + int(count)
    if "timing" not in report.keywords:
        return
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _TIMING["skipped" if report.skipped else "judged"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or not os.environ.get("CI"):
        return
    if _TIMING["skipped"] and not _TIMING["judged"] and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FUZZED:
        terminalreporter.write_line(f"fuzzed: {sum(_FUZZED.values()):,} inputs over {len(_FUZZED)} readers: "
                                    + ", ".join(f"{name} {n:,}" for name, n in sorted(_FUZZED.items())))
    judged, skipped = _TIMING["judged"], _TIMING["skipped"]
    if judged or skipped:
        verdict = " — every one skipped: CI fails (run the suite on a quieter machine)" if (
            skipped and not judged and os.environ.get("CI")) else ""
        terminalreporter.write_line(f"timing tests: {judged} judged, {skipped} skipped on a busy machine{verdict}")
