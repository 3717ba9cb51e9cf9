"""What the simulator really did with each request — when it arrived, when each token left — kept for clients
to check their own timestamps against (`/sim/truth`), bounded: a simulator left running as a test target kept
every request (~10 KiB each, 26 GB a day at 30 req/s). An ended request keeps only its times; none outlives
two minutes after its arrival (clients fetch truth right after a run: the longest, calibration's levels, run
well under it) or the newest 200,000; at 30 req/s that is ~2 MiB, reached in two minutes."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass

from harness.clock import NS_PER_S
from harness.sim.engine import SimRequest

KEEP = 200_000
KEEP_NS = 120 * NS_PER_S


@dataclass(frozen=True, slots=True)
class EndedTruth:
    """An ended request's ground truth, without the engine state it no longer needs (its blocks, its hashes):
    its token times as 8 bytes each."""

    request_id: str
    arrival_ns: int
    prompt_tokens: int
    output_tokens: int
    token_ns: array[int]
    finished: bool
    aborted: bool
    preemptions: int
    scheduled_ns: int | None

    @classmethod
    def of(cls, req: SimRequest) -> EndedTruth:
        return cls(req.request_id, req.arrival_ns, req.prompt_tokens, req.output_tokens, array("q", req.token_ns),
                   req.finished, req.aborted, req.preemptions, req.scheduled_ns)


class GroundTruth:
    """Requests by id, in arrival order: live ones as the engine holds them, ended ones compact."""

    def __init__(self) -> None:
        self.kept: OrderedDict[str, SimRequest | EndedTruth] = OrderedDict()

    def arrived(self, req: SimRequest) -> None:
        kept = self.kept
        kept[req.request_id] = req
        while len(kept) > KEEP:
            kept.popitem(last=False)
        too_old = req.arrival_ns - KEEP_NS
        while kept and next(iter(kept.values())).arrival_ns < too_old:  # in arrival order: oldest first
            kept.popitem(last=False)

    def ended(self, req: SimRequest) -> None:
        if req.request_id in self.kept:
            self.kept[req.request_id] = EndedTruth.of(req)

    def get(self, request_id: str) -> dict[str, object] | None:
        req = self.kept.get(request_id)
        if req is None:
            return None
        return {"request_id": req.request_id, "arrival_ns": req.arrival_ns, "prompt_tokens": req.prompt_tokens,
                "output_tokens": req.output_tokens, "token_ns": list(req.token_ns), "finished": req.finished,
                "aborted": req.aborted, "preemptions": req.preemptions, "scheduled_ns": req.scheduled_ns}
