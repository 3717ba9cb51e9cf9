"""The simulator's ground truth stays bounded when it is left running as a test target: an ended request keeps
only its times, and none is kept past five minutes after it arrived."""

from __future__ import annotations

from harness.clock import NS_PER_S
from harness.config.simulator import SimulatorConfig
from harness.sim.engine import SimRequest
from harness.sim.server import _GROUND_TRUTH_KEEP_NS, SimServer, Truth, _truth


def _ended(server: SimServer, rid: str, arrival_ns: int) -> SimRequest:
    req = SimRequest(rid, 10, 3, arrival_ns)
    req.block_hashes.extend(range(100))
    server._remember(req)
    req.token_ns.extend([arrival_ns + 1, arrival_ns + 2, arrival_ns + 3])
    req.finished = True
    server._ended(req)
    return req


def test_an_ended_request_keeps_its_times_and_nothing_else() -> None:
    server = SimServer(SimulatorConfig(timing="fixed"))
    req = _ended(server, "a", 5)
    kept = server.ground_truth["a"]
    assert isinstance(kept, Truth) and not hasattr(kept, "block_hashes")
    assert _truth(kept) == _truth(req) and _truth(kept)["token_ns"] == [6, 7, 8]


def test_truth_older_than_the_window_is_let_go() -> None:
    server = SimServer(SimulatorConfig(timing="fixed"))
    _ended(server, "old", 0)
    _ended(server, "recent", _GROUND_TRUTH_KEEP_NS - NS_PER_S)
    assert set(server.ground_truth) == {"old", "recent"}
    _ended(server, "now", _GROUND_TRUTH_KEEP_NS + NS_PER_S)
    assert set(server.ground_truth) == {"recent", "now"}
