"""The simulator in its own process stops cleanly on SIGTERM (how a harness run stops its bundled one), so it says
its last words — how late its steps were — instead of dying mid-sentence."""

from __future__ import annotations

import subprocess
import sys
import time


def test_the_simulator_stops_cleanly_on_sigterm_to_say_its_last_words() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None and proc.stdout.readline()
    time.sleep(0.2)
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err  # SIGTERM handled: the server cleaned up (killed by it: -15)
