from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest


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
