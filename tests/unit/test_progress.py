import asyncio
import io

import numpy as np
import pytest

from harness.clock import NS_PER_MS, NS_PER_S, FakeClock
from harness.config.load import describe
from harness.config.scenario import parse_scenario
from harness.records import RequestRecord
from harness.run.display import Display, LineDisplay, make_display
from harness.run.progress import Goal, Progress, goal
from harness.workload.plan import BatchPlan, ClosedLoopPlan, OpenLoopPlan, plan_phase


def done(i: int, status: str = "ok", ttft_ms: int = 20, tokens: int = 10) -> RequestRecord:
    rec = RequestRecord(f"r{i}", "p", i, 8, tokens, 0, sent_ns=0, first_token_ns=ttft_ms * NS_PER_MS,
                        completion_tokens=tokens, status=status)  # type: ignore[arg-type]
    rec.chunk_ns = [ttft_ms * NS_PER_MS + k for k in range(tokens)]
    return rec


def test_progress_reports_counts_rates_median_ttft_and_place_in_the_plan() -> None:
    clock = FakeClock()
    progress = Progress(clock, phases=2)
    progress.start("interactive", Goal(requests=20, seconds=None), lambda: 7)
    for i, ttft in enumerate((10, 20, 30, 40)):
        progress.record(done(i, ttft_ms=ttft))
    progress.record(done(9, status="timeout"))
    clock.advance_to(2 * NS_PER_S)
    assert progress.how() == "sent 7  done 5  2.5 req/s  20 tok/s  TTFT p50 25.0 ms  errors 1"
    # 5 of 20 done in 2 s: a quarter of the bar, 15 more at 2.5/s is about 6 s.
    assert progress.where() == "phase 1/2 interactive  ███░░░░░░░░░ 5/20 req  ~6 s left"
    progress.start("batch", Goal(requests=None, seconds=90.0), lambda: 7)
    assert "done 0" in progress.how() and "TTFT p50 -" in progress.how()
    clock.advance_to(32 * NS_PER_S)
    assert progress.where() == "phase 2/2 batch  ████░░░░░░░░ 30 s/1:30  1:00 left"
    clock.advance_to(200 * NS_PER_S)
    assert progress.where().endswith("████████████ 3:18/1:30  draining")  # past its length: answers due


def test_goal_counts_what_each_load_model_plans() -> None:
    scenario = parse_scenario({"name": "g", "workload": {"prompt_tokens": 8, "output_tokens": 4}, "phases": [
        {"name": "open", "load": {"type": "constant", "rate": 10, "requests": 30}},
        {"name": "closed", "load": {"type": "concurrency", "concurrency": 2, "duration_s": "1m"}},
        {"name": "batch", "load": {"type": "batch", "size": 4, "batches": 3}}]}, "test")
    plans = [plan_phase(scenario, i, "run") for i in range(3)]
    assert isinstance(plans[0], OpenLoopPlan) and isinstance(plans[1], ClosedLoopPlan)
    assert isinstance(plans[2], BatchPlan)
    assert goal(plans[0]) == Goal(30, pytest.approx(2.9))  # 30 arrivals at 10/s: the last at 2.9 s
    assert goal(plans[1]) == Goal(None, 60.0)
    assert goal(plans[2]) == Goal(12, None)
    assert [describe(p.load) for p in scenario.phases] == [
        "constant 10 req/s, 30 requests", "concurrency 2, 60 s", "batch 4 × 3"]


async def test_line_display_prints_plain_lines_and_warnings_as_they_come() -> None:
    out = io.StringIO()
    display = LineDisplay(out, every_s=0.01)
    progress = Progress(FakeClock(), phases=1)
    progress.start("p", Goal(10, None), lambda: 3)
    display.follow(progress)
    await asyncio.sleep(0.05)
    display.warn("something happened")
    await display.stop()
    lines = out.getvalue().splitlines()
    assert "warning: something happened" in lines
    progress_lines = [line for line in lines if line.startswith("phase 1/1 p")]
    assert len(progress_lines) >= 2 and all(" | sent 3  done 0" in line for line in progress_lines)
    await asyncio.sleep(0.05)
    assert out.getvalue().splitlines() == lines  # stopped means stopped


def test_auto_display_is_plain_lines_off_a_terminal() -> None:
    assert type(make_display("auto", io.StringIO())) is LineDisplay
    assert type(make_display("off", io.StringIO())) is Display
    assert np.isclose(LineDisplay().every_s, 10.0)
