"""A first run on a busy machine reads calmly: one short line per client-limited phase under the table (the
whole reason in report.html), a live warning that does not claim more than its window saw, and the simulator's
late steps summed up once at the end."""

from __future__ import annotations

from harness.clock import NS_PER_MS
from harness.config.scenario import SLO
from harness.report.notes import client_limited_line, limited_reasons
from harness.sim.lateness import LateSteps
from harness.stats.verdict import GUESS, GUESS_SHARED, ClientCheck, verdict
from tests.helpers import phase_json, rec, summary_of


def _limited(metrics: list[str], moved: dict[str, float], reason: str) -> dict:
    phase = {**phase_json([rec(0, 0, [10, 20], completion=2)], SLO()), "name": "interactive"}
    return {**phase, "client_limited": True, "client_limited_reason": reason, "client_limited_metrics": metrics,
            "client_moved": moved}


def test_a_client_limited_phase_is_one_short_line_and_its_reason_goes_to_the_report() -> None:
    reason = ("harness not scheduled: waits for its event loop p99 293.8 ms; sending lateness p99 305.5 ms at only "
              "6% of a core, …: it could have moved itl_p99 by ~1190%, ttft_p99 by ~82%")
    summary = summary_of([_limited(["itl_p99", "ttft_p99", "ttft_p90"], {"itl_p99": 11.9, "ttft_p99": 0.82,
                                                                        "ttft_p90": 0.4}, reason)])
    line = client_limited_line(summary.phases[0])
    assert line == ("phase interactive: 3 figures may be off by up to 1190% (the * rows): the machine is busy (the "
                    "harness waited for a CPU) — see notes in report.html")
    assert limited_reasons(summary) == [f"phase interactive, why its figures may be off: {reason}"]
    whole = summary_of([_limited([], {}, "harness saturated: lag at 97% of a core")])
    assert "its figures may be off" in client_limited_line(whole.phases[0])
    assert "the harness used its whole core" in client_limited_line(whole.phases[0])


def test_the_guess_of_who_holds_the_cores_follows_the_machines_load() -> None:
    busy = ClientCheck(loop_lag_p99_ms=50, cpu_share=0.05, runq_share=0.4, load_per_core=1.6)
    quiet = ClientCheck(loop_lag_p99_ms=50, cpu_share=0.05, runq_share=0.4, load_per_core=0.2)
    assert verdict("lag", busy) == ("not_scheduled", "harness not scheduled: lag at only 5% of a core, waiting for a "
                                    f"CPU 40% of the time, machine load 1.6 per core: {GUESS}")
    name, reason = verdict("lag", quiet)
    assert name == "not_scheduled" and reason.endswith(GUESS_SHARED) and "holds its cores" not in reason


def test_late_steps_are_said_once_live_and_summed_up_at_the_end() -> None:
    live, bundled = LateSteps(live=True), LateSteps(live=False)
    said = [line for late in (1, 3, 10, 4) for line in [live.observe(late * NS_PER_MS)] if line]
    assert len(said) == 1 and "3.0 ms late" in said[0]
    assert not [line for late in (3, 10) if (line := bundled.observe(late * NS_PER_MS))]
    assert live.summary() == ("sim: fell behind real time in 3 steps (worst 10.0 ms late; token times stay truthful: "
                              "the machine was busier than the simulated accelerator is fast)")
    assert LateSteps(live=False).summary() is None
