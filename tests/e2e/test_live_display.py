"""The live view as a person sees it: `harness run` in a pseudo-terminal of 80 columns, its output played
through a terminal emulator (pyte). Nothing may wrap, and a warning said mid-run lands above the view."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pyte

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = 80


class WrapCountingScreen(pyte.Screen):
    """A screen that counts every time text runs past the right edge onto the next row."""

    wraps = 0

    def draw(self, data: str) -> None:
        if self.cursor.x + len(data) > self.columns:
            self.wraps += 1
        super().draw(data)


def _run_in_pty(args: list[str], cwd: Path, interrupt_when: bytes) -> tuple[bytes, int]:
    """Run the harness on a pty of 80 columns; send Ctrl-C (to its group, as a terminal does) once
    `interrupt_when` has been written, and return everything written to the terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, stdin=slave, stdout=slave,
                            stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    out = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the pty closed with the process
                return
            if not chunk:
                return
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while interrupt_when not in out and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)  # a few refreshes of the view with requests done
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=90)
    reader.join(timeout=10)
    os.close(master)
    return bytes(out), code


def test_live_view_fits_80_columns_and_warnings_land_above_it(tmp_path: Path) -> None:
    raw, code = _run_in_pty(["run", "--rate", "20", "--duration", "60s", "--output-tokens", "32",
                             "--reports-dir", "r"], tmp_path, interrupt_when=b"done ")
    text = raw.decode(errors="replace")
    assert code == 130, text[-2000:]
    assert "phase 1/1 interactive" in text and "req/s" in text  # the view was shown
    screen = WrapCountingScreen(COLUMNS, 400)  # tall enough that nothing scrolls away
    stream = pyte.Stream(screen)
    stream.feed(text.replace("\n", "\r\n"))  # the pty's own translation (onlcr), which pyte does not do
    assert screen.wraps == 0, "a line ran past 80 columns"
    lines = [line.rstrip() for line in screen.display]
    # The plan came first, before any request.
    assert lines[0].startswith("run quick against the bundled simulator")
    assert "  1/1 interactive  poisson 20 req/s, 60 s" in lines
    # The Ctrl-C warning is whole, on its own lines, and no fragment of the view is left anywhere.
    start = next(i for i, line in enumerate(lines) if line.startswith("warning: SIGINT: stopped sending"))
    said = " ".join(lines[start:start + 2])
    assert "waiting for requests in flight (again to cancel them)" in said
    assert not any("TTFT p50" in line or line.startswith("phase 1/1") for line in lines), "view left behind"
    assert any("STOPPED after" in line for line in lines)
    assert "Traceback" not in text
