"""The one rule that says whose fault a late client is."""

from __future__ import annotations

import pytest

from harness.stats.verdict import ClientCheck, blamed, verdict, worst


@pytest.mark.parametrize(("check", "expected"), [
    (ClientCheck(cpu_share=0.97), "saturated"),
    (ClientCheck(cpu_share=0.02, runq_share=0.6), "not_scheduled"),
    (ClientCheck(cpu_share=0.02, runq_share=0.01, load_per_core=3.5), "not_scheduled"),
    (ClientCheck(cpu_share=0.02, runq_share=0.01, load_per_core=0.3), "stalled"),
])
def test_a_late_client_is_judged_by_its_cpu_and_its_wait_for_one(check: ClientCheck, expected: str) -> None:
    name, reason = verdict("lag p99 9.0 ms > 5.0 ms", check)
    assert name == expected
    assert reason.startswith(f"harness {expected.replace('_', ' ')}: lag p99 9.0 ms > 5.0 ms")


def test_without_readings_a_late_client_is_only_said_late() -> None:
    assert verdict("lag p99 9.0 ms > 5.0 ms", ClientCheck()) == ("stalled", "lag p99 9.0 ms > 5.0 ms")


def test_nothing_late_is_ok_however_busy() -> None:
    assert verdict(None, ClientCheck(cpu_share=0.99, runq_share=0.9)) == ("ok", "")


def test_the_reason_names_the_numbers() -> None:
    _, reason = verdict("lag", ClientCheck(cpu_share=0.019, runq_share=0.6, load_per_core=4.0))
    assert "only 2% of a core" in reason and "waiting for a CPU 60% of the time" in reason
    assert "machine load 4.0 per core" in reason


def test_the_worst_verdict_wins() -> None:
    assert worst(("ok", ""), ("stalled", "s"), ("not_scheduled", "n")) == ("not_scheduled", "n")
    assert worst(("saturated", "x"), ("not_scheduled", "n"))[0] == "saturated"


def test_the_bottleneck_is_the_late_client_first_then_a_queueing_server() -> None:
    from harness.stats.schema import ServerPhase
    from harness.stats.summary import bottleneck

    queue = ServerPhase.model_construct(waiting_mean=11.5)
    assert bottleneck(True, queue) == "client"
    assert bottleneck(False, queue) == "server"
    assert bottleneck(False, ServerPhase.model_construct(waiting_mean=0.1)) is None
    assert bottleneck(False, None) is None


@pytest.mark.parametrize(("idle", "says"), [
    (5.8, "5.8 cores of this machine were idle meanwhile: `--workers 7`"),
    (0.2, "no core of this machine was idle meanwhile: more load needs more hosts"),  # a simulator held the other
    (None, None),  # a check read back from disk: nothing is known of the machine, nothing is suggested
])
def test_a_saturated_harness_is_told_how_many_workers_the_idle_cores_allow(idle: float | None,
                                                                            says: str | None) -> None:
    check = ClientCheck(loop_lag_p99_ms=40.0, cpu_share=0.98, idle_cores=idle)
    name, reason = verdict("schedule lag p99 80 ms > 5 ms", check)
    assert name == "saturated"
    if says is None:
        assert "--workers" not in reason and "hosts" not in reason
    else:
        assert says in reason


def test_a_known_cause_replaces_the_guess_at_the_server() -> None:
    name, reason = verdict("schedule lag p99 900 ms", ClientCheck(cpu_share=0.02, runq_share=0.6))
    assert name == "not_scheduled" and "the server on the same machine?" in reason
    said = blamed(reason, "worker 1 was frozen for 3.0 s")
    assert said.startswith("worker 1 was frozen for 3.0 s; harness not scheduled: schedule lag p99 900 ms")
    assert "server" not in said and "waiting for a CPU 60% of the time" in said
    # A reason with no guess in it (saturated) keeps every word after the cause.
    _, busy = verdict("schedule lag p99 900 ms", ClientCheck(cpu_share=0.99))
    assert blamed(busy, "worker 0 was frozen") == f"worker 0 was frozen; {busy}"
