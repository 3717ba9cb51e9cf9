"""`--wait-for-endpoint`: a harness started before its server (a compose stack) waits for it instead of failing;
an endpoint that answers "no" (a 401, a 404) is not waited for."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import ROOT, harness


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_run_waits_for_a_server_that_starts_late(tmp_path: Path) -> None:
    port = _free_port()
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", "--endpoint", f"http://127.0.0.1:{port}/v1",
                            "--wait-for-endpoint", "60s", "--requests", "4", "--rate", "20", "--prompt-tokens", "16",
                            "--output-tokens", "4", "--reports-dir", str(tmp_path), "--progress", "off"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2)  # the harness is asking a port nobody serves yet
    assert run.poll() is None, run.communicate()
    sim = subprocess.Popen([sys.executable, "-m", "harness", "sim", "serve", "--port", str(port), "--timing",
                            "fixed"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        _, err = run.communicate(timeout=120)
    finally:
        sim.terminate()
        sim.wait(timeout=15)
    assert run.returncode == 0, err
    assert f"waiting up to 60 s for http://127.0.0.1:{port}/v1" in err
    assert list(tmp_path.glob("*/summary.json"))


def test_without_waiting_an_absent_server_fails_at_once() -> None:
    started = time.monotonic()
    proc = harness("run", "--endpoint", f"http://127.0.0.1:{_free_port()}/v1", "--requests", "2", "--rate", "5",
                   "--reports-dir", "/tmp/harness-never-written")
    assert proc.returncode == 3 and "cannot reach endpoint" in proc.stderr
    assert time.monotonic() - started < 30
