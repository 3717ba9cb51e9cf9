"""The busy-machine reading that decides whether a timing test's failure can be judged (tests/machine.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests import machine
from tests.machine import Reading

TICK = os.sysconf("SC_CLK_TCK")
LOOP = [sys.executable, "-c", "while True: pass"]


def test_other_processes_cores_are_the_machines_busy_time_less_our_own() -> None:
    before = Reading(wall_s=10.0, busy=1000, own=400)
    after = Reading(wall_s=12.0, busy=1000 + 3 * TICK, own=400 + 2 * TICK)  # 1.5 cores busy, 1 of them ours
    assert machine.others_cores(before, after) == pytest.approx(0.5)
    assert machine.verdict(before, after) is not None and "held 0.5 of" in str(machine.verdict(before, after))
    quiet = Reading(wall_s=12.0, busy=1000 + 2 * TICK, own=400 + 2 * TICK)  # all of it ours
    assert machine.others_cores(before, quiet) == 0.0 and machine.verdict(before, quiet) is None
    assert machine.others_cores(before, Reading(10.01, 1000, 400)) is None  # no time to judge by


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_a_process_the_test_started_is_its_own_load_and_a_stranger_is_not() -> None:
    child = subprocess.Popen(LOOP)  # ours: the simulator or a worker a test starts is counted as the test's
    try:
        before = machine.read()
        time.sleep(1.0)
        after = machine.read()
    finally:
        child.kill()
        child.wait()
    assert (after.own - before.own) / TICK >= 0.3  # the child's CPU counts as the test's own
    # A busy loop that is nobody's child here (its parent, a shell, exits at once): another process's load.
    before = machine.read()
    machine.busy_elsewhere(1.5)
    after = machine.read()
    held = machine.others_cores(before, after)
    assert held is not None and held >= 0.3


pytest_plugins = ["pytester"]

_INNER = '''
import pytest

from tests.machine import busy_elsewhere

@pytest.mark.timing
def test_late_on_a_busy_machine():
    busy_elsewhere(1.5)
    assert False, "a timer fired 40 ms late"

@pytest.mark.timing
def test_late_on_a_quiet_machine():
    assert False, "a timer fired 40 ms late"

def test_not_about_timing_on_a_busy_machine():
    busy_elsewhere(1.5)
    assert False, "a wrong count"
'''


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_a_timing_failure_on_a_busy_machine_is_a_skip_with_its_reason(pytester: pytest.Pytester) -> None:
    """Only a `timing` test, only when another process held the cores, and the reason says both; a timing test
    that fails on a quiet machine still fails (unless this machine is busy right now: then it cannot say)."""
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    package = pytester.mkpydir("tests")
    for name in ("conftest.py", "machine.py"):
        (package / name).write_text((here / name).read_text(encoding="utf-8"), encoding="utf-8")
    (package / "test_inner.py").write_text(_INNER, encoding="utf-8")
    before = machine.read()
    result = pytester.runpytest_subprocess("-rfs", "-p", "no:cacheprovider", "tests/test_inner.py")
    busy_here = machine.verdict(before, machine.read())
    outcomes = result.parseoutcomes()
    text = result.stdout.str()
    assert "machine too busy to judge timing" in text and "a timer fired 40 ms late" in text
    assert outcomes.get("skipped", 0) >= 1
    assert "FAILED tests/test_inner.py::test_not_about_timing_on_a_busy_machine" in text
    if busy_here is None:
        assert "FAILED tests/test_inner.py::test_late_on_a_quiet_machine" in text



@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc (Linux)")
def test_a_stretch_of_a_long_test_is_judged_on_its_own() -> None:
    """One night of the nightly test's week: a failure inside it while another process held a core is a skip
    naming the stretch; a passing stretch is silent whatever the load."""
    skipped = pytest.raises(pytest.skip.Exception, match=r"too busy to judge timing.*\(night 7\); it failed with")
    with skipped, machine.judging("night 7"):
        machine.busy_elsewhere(1.0)
        raise AssertionError("a tail moved by 35%")
    with machine.judging("night 8"):
        machine.busy_elsewhere(0.3)
