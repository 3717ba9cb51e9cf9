"""Shards of one schedule: N of them together are the single-process schedule, request for request."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.config.scenario import parse_scenario
from harness.run.distributed.sharding import since_launch_s
from harness.run.distributed.timeline import PhaseGate, manual_gate
from harness.voice import Heard
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, PhasePlan, SessionPlan, plan_phase
from harness.workload.shards import Shard, empty, idle_line, planned_span_s, shard_plan, timetable

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
                          (["--shard", "0/2", "--start-at", "1"], "give a lead of at least 5 s"),  # unless asked for
                          (["--workers", "2", "--shard", "0/2", "--start-at", "1", "--late-ok"], "drop --shard"),
                          (["--workers", "1"], "--workers")):
        result = CliRunner().invoke(main, ["run", "--rate", "1", "--requests", "1", *args, "--reports-dir",
                                           str(tmp_path)])
        assert result.exit_code == 2 and problem in result.output, result.output


def test_shards_by_hand_plan_each_phase_start_from_the_schedules_of_the_whole_run() -> None:
    """Every shard derives the same timetable (from the whole plan, not its share), and nothing is planned after a
    phase that only its answers end."""
    poisson = plan({"type": "poisson", "rate": 20, "requests": 37}, 3)
    closed = plan({"type": "concurrency", "concurrency": 3, "duration_s": 2.5}, 3)
    batch = plan({"type": "batch", "size": 4, "batches": 2}, 3)
    assert isinstance(poisson, OpenLoopPlan)
    last = float(poisson.offsets_ns[-1]) / 1e9
    assert planned_span_s(poisson) == last and planned_span_s(closed) == 2.5 and planned_span_s(batch) is None
    # A shard's share ends earlier than the whole schedule: the plan must not come from it.
    assert planned_span_s(shard_plan(poisson, Shard(1, 2))) < last  # 37 arrivals: its last is the 36th
    spans = [planned_span_s(p) for p in (poisson, closed, batch, poisson)]
    assert timetable(100.0, spans, 5.0) == [100.0, 100.0 + last + 5.0, 100.0 + last + 5.0 + 2.5 + 5.0, None]
    assert timetable(100.0, [None, 1.0], 5.0) == [100.0, None]


def test_a_phase_that_begins_after_its_planned_start_is_counted_and_named() -> None:
    said: list[str] = []
    now = time.time()
    gate = PhaseGate(starts=[now - 10, now - 0.3, now + 0.05, None], voice=Heard(warned=said))

    async def go() -> None:
        for k, name in enumerate(("a", "b", "c", "d")):
            await gate.before(k, name)

    asyncio.run(go())
    assert time.time() >= now + 0.05  # it waited for c's planned start
    assert set(gate.late_ms) == {"b", "c"} and gate.late_ms["b"] >= 300  # a: the common start's; d: no plan
    assert len(said) == 1 and "phase b began" in said[0] and "--phase-slack" in said[0]


def test_a_gate_by_hand_says_up_front_what_no_plan_can_hold() -> None:
    scenario = parse_scenario({"name": "s", "workload": {"prompt_tokens": 16, "output_tokens": 4}, "phases": [
        {"name": "open", "load": {"type": "poisson", "rate": 20, "requests": 10}},
        {"name": "batches", "load": {"type": "batch", "size": 4, "batches": 3}},
        {"name": "after", "load": {"type": "poisson", "rate": 20, "requests": 10}}]}, "test")
    whole = [plan_phase(scenario, i, "run-1") for i in range(3)]
    said: list[str] = []
    gate = manual_gate(scenario.phases, whole, 100.0, 5.0, Heard(warned=said))
    assert gate.starts[:2] == [100.0, 100.0 + planned_span_s(whole[0]) + 5.0] and gate.starts[2] is None  # type: ignore[operator]
    assert len(said) == 2 and "phase batches" in said[0] and "first batch together" in said[0]
    assert "phase after has no planned start" in said[1]


@pytest.mark.parametrize(("load", "n", "idle", "said"), [
    ({"type": "concurrency", "concurrency": 3, "requests": 12}, 4, [3],
     "phase p: 3 users over 4 workers: worker 3 idles in it (nothing of the load is lost)"),
    ({"type": "constant", "rate": 5, "requests": 2}, 4, [2, 3],
     "phase p: 2 requests over 4 workers: workers 2, 3 idle in it (nothing of the load is lost)"),
    ({"type": "batch", "size": 3, "batches": 2}, 5, [3, 4],
     "phase p: 3 requests a batch over 5 workers: workers 3, 4 idle in it (nothing of the load is lost)"),
    ({"type": "concurrency", "concurrency": 4, "requests": 12}, 4, [], None),
])
def test_shards_without_a_share_are_said_and_the_rest_hold_the_whole_load(load: dict, n: int, idle: list[int],
                                                                          said: str | None) -> None:
    whole = plan(load, 0)
    parts = [shard_plan(whole, Shard(i, n)) for i in range(n)]
    assert [i for i, p in enumerate(parts) if empty(p)] == idle
    assert sorted(x for p in parts for x in sent(p)) == sent(whole)
    assert idle_line("p", whole, n, who="worker") == said
    assert not empty(whole) and idle_line("p", whole, 1) is None


def test_a_process_knows_how_long_ago_it_was_launched() -> None:
    """The lead a shard needed is read from the kernel's start time of the process (Linux), to 10 ms."""
    first = since_launch_s()
    if first is None:
        pytest.skip("no /proc here: a shard's ready_s is null")
    started = time.monotonic()
    time.sleep(0.05)
    second = since_launch_s()
    assert second is not None and 0 < first < second
    assert second - first == pytest.approx(time.monotonic() - started, abs=0.03)
