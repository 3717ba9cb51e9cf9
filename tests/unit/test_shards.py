"""Shards of one schedule: N of them together are the single-process schedule, request for request."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.config.scenario import parse_scenario
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan, SessionPlan, plan_phase
from harness.workload.shards import Shard, shard_plan

LOADS = [
    {"type": "poisson", "rate": 20, "requests": 37},
    {"type": "gamma", "rate": 10, "cv": 2.0, "requests": 23},
    {"type": "constant", "rate": 5, "requests": 11},
    {"type": "ramp", "start_rate": 1, "end_rate": 9, "duration_s": 4},
    {"type": "concurrency", "concurrency": 5, "requests": 29},
    {"type": "concurrency", "concurrency": 2, "requests": 9},
    {"type": "batch", "size": 7, "batches": 3},
]


def plan(load: dict, seed: int, sessions: bool = False) -> PhasePlan:
    workload = {"prompt_tokens": 16, "output_tokens": 4, **({"sessions": {"turns": 2}} if sessions else {})}
    scenario = parse_scenario({"name": "s", "seed": seed, "workload": workload,
                               "phases": [{"name": "p", "load": load}]}, "test")
    return plan_phase(scenario, 0, "run-1")


def sent(p: PhasePlan) -> list[tuple[str, int | None, int | None]]:
    """What a plan sends: (request id, intended offset or None, batch or None), in a canonical order."""
    if isinstance(p, OpenLoopPlan):
        return sorted((s.request_id, int(t), None) for s, t in zip(p.specs, p.offsets_ns, strict=True))
    if isinstance(p, BatchPlan):
        return sorted((s.request_id, None, b) for b, batch in enumerate(p.batches) for s in batch)
    if isinstance(p, ClosedLoopPlan):
        assert p.requests is not None
        return sorted((p.build(k).request_id, None, None) for k in range(p.requests))
    assert isinstance(p, SessionPlan)
    which = p.conversations if p.conversations is not None else range(len(p.offsets_ns))
    return sorted((str(c), int(t), None) for c, t in zip(which, p.offsets_ns, strict=True))


@settings(max_examples=40, deadline=None)
@given(load=st.sampled_from(LOADS), seed=st.integers(0, 2**16), n=st.integers(1, 6), sessions=st.booleans())
def test_the_shards_together_are_the_single_process_schedule(load: dict, seed: int, n: int, sessions: bool) -> None:
    open_loop = load["type"] not in ("concurrency", "batch")
    whole = plan(load, seed, sessions and open_loop)
    parts = [shard_plan(whole, Shard(i, n)) for i in range(n)]
    union = sorted(x for p in parts for x in sent(p))
    assert union == sent(whole)  # nothing lost, nothing twice, the same ids, times and batches
    if isinstance(whole, ClosedLoopPlan):
        assert sum(p.concurrency for p in parts) == whole.concurrency  # type: ignore[attr-defined]
        assert all(p.requests == 0 for p in parts if p.concurrency == 0)  # type: ignore[attr-defined]
    if isinstance(whole, BatchPlan):  # each shard's batch k holds its share of the one batch k
        assert all(len(p.batches) == len(whole.batches) for p in parts if isinstance(p, BatchPlan) and n <= 7)


def test_closed_loop_requests_follow_the_users() -> None:
    """3 users over 2 shards: 2 + 1 users and 2/3 + 1/3 of the requests, so both shards send for the whole phase
    (12 + 12 left one shard a single user for 59% of the phase, and tokens/s fell 34%)."""
    whole = plan({"type": "concurrency", "concurrency": 3, "requests": 24}, 1)
    a, b = (shard_plan(whole, Shard(i, 2)) for i in range(2))
    assert isinstance(a, ClosedLoopPlan) and isinstance(b, ClosedLoopPlan)
    assert (a.concurrency, a.requests, b.concurrency, b.requests) == (2, 16, 1, 8)
    assert [a.index(k) for k in range(6)] == [0, 2, 3, 5, 6, 8] and [b.index(k) for k in range(3)] == [1, 4, 7]
    # Per user the same number of requests on either shard: they end together.
    assert a.requests / a.concurrency == b.requests / b.concurrency


def test_a_shard_is_i_of_n_and_every_shard_derives_the_same_run_id() -> None:
    assert Shard.parse("2/4") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    for bad in ("4/4", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError, match=r"i/N|index"):
            Shard.parse(bad)
    ids = {Shard(i, 4).run_id("quickstart", 1764560000.0) for i in range(4)}
    assert len(ids) == 1 and Shard(0, 4).run_id("quickstart", 1764560001.0) not in ids


def test_shard_and_worker_flags_are_checked(tmp_path: Path) -> None:
    for args, problem in ((["--shard", "2/2", "--start-at", "1", "--late-ok"], "index must be 0 to 1"),
                          (["--shard", "0/2"], "needs --start-at"),
                          (["--shard", "0/2", "--start-at", "1"], "s in the past"),  # refused unless asked for
                          (["--workers", "2", "--shard", "0/2", "--start-at", "1", "--late-ok"], "drop --shard"),
                          (["--workers", "1"], "--workers")):
        result = CliRunner().invoke(main, ["run", "--rate", "1", "--requests", "1", *args, "--reports-dir",
                                           str(tmp_path)])
        assert result.exit_code == 2 and problem in result.output, result.output
