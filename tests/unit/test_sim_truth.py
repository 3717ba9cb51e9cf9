"""The simulator's ground truth stays bounded when it is left running as a test target: an ended request keeps
only its times, and none is kept past five minutes after it arrived."""

from __future__ import annotations

from harness.clock import NS_PER_S
from harness.sim.engine import SimRequest
from harness.sim.truth import KEEP_NS, EndedTruth, GroundTruth


def _ended(truth: GroundTruth, rid: str, arrival_ns: int) -> dict[str, object] | None:
    req = SimRequest(rid, 10, 3, arrival_ns)
    req.block_hashes.extend(range(100))
    truth.arrived(req)
    req.token_ns.extend([arrival_ns + 1, arrival_ns + 2, arrival_ns + 3])
    req.finished = True
    live = truth.get(rid)
    truth.ended(req)
    return live


def test_an_ended_request_keeps_its_times_and_nothing_else() -> None:
    truth = GroundTruth()
    live = _ended(truth, "a", 5)
    kept = truth.kept["a"]
    assert isinstance(kept, EndedTruth) and not hasattr(kept, "block_hashes")
    assert truth.get("a") == live and live is not None and live["token_ns"] == [6, 7, 8]


def test_truth_older_than_the_window_is_let_go() -> None:
    truth = GroundTruth()
    _ended(truth, "old", 0)
    _ended(truth, "recent", KEEP_NS - NS_PER_S)
    assert set(truth.kept) == {"old", "recent"}
    _ended(truth, "now", KEEP_NS + NS_PER_S)
    assert set(truth.kept) == {"recent", "now"} and truth.get("old") is None
