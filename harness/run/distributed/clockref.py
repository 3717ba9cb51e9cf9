"""A wall clock shards by hand can measure theirs against (`harness clock` serves it; `--clock-ref URL` reads
it): they have no parent to ask, and NTP's promise (hosts agree within milliseconds) fails on a host whose
clock drifted or was never synchronised — its share would then start, and be merged, hundreds of ms off.

NTP-style: each round reads this host's wall clock before and after a request for the reference's; the offset
is the reference's reading minus the midpoint, its uncertainty half the round trip; the round with the
shortest trip is kept."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.request import ProxyHandler, build_opener

from harness.doors import json_value

ROUNDS = 8
TIMEOUT_S = 2.0


class _Clock(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"time_ns": time.time_ns()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # one line a request would flood the terminal
        return


def clock_server(host: str, port: int) -> ThreadingHTTPServer:
    """This host's wall clock as JSON (`{"time_ns": …}`) at any path; `serve_forever()` to run it."""
    return ThreadingHTTPServer((host, port), _Clock)


def measure(url: str, rounds: int = ROUNDS) -> tuple[float, float]:
    """(the reference's wall clock − this host's, ± uncertainty), ms; OSError/ValueError when it cannot be
    read."""
    opener = build_opener(ProxyHandler({}))  # direct, as every request the harness makes
    best: tuple[float, float] | None = None
    for _ in range(rounds):
        sent = time.time_ns()
        with opener.open(url, timeout=TIMEOUT_S) as resp:
            answer = json_value(resp.read(4096))  # a clock's answer is 30 bytes; a bigger one is not a clock's
        theirs = answer.get("time_ns") if isinstance(answer, dict) else None
        if not isinstance(theirs, int) or isinstance(theirs, bool):
            raise ValueError(f"{url} answered no time_ns: not a harness clock")
        back = time.time_ns()
        offset, half = (theirs - (sent + back) / 2) / 1e6, (back - sent) / 2e6
        if best is None or half < best[1]:
            best = (offset, half)
    assert best is not None
    return best
