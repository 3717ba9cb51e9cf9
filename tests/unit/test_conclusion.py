from harness.stats.conclusion import comparisons, sentences
from harness.stats.schema import (
    Distribution,
    Goodput,
    Load,
    PhaseLatencies,
    PhaseSummary,
    Requests,
    ServerPhase,
    Stress,
    Throughput,
)


def phase(name: str, load: dict, tput: float, ttft_p50: float | None, ttft_p99: float | None, itl: float | None,
          good: float, offered: float = 4.0, waiting_max: float | None = None, e2e_p99: float = 1000.0,
          texts_per_s: float = 4.0) -> PhaseSummary:
    """Only the fields the comparison reads (model_construct skips validation of the rest)."""
    latency = PhaseLatencies.model_construct(ttft=Distribution.model_construct(p50=ttft_p50, p99=ttft_p99),
                                             itl=Distribution.model_construct(p50=itl),
                                             e2e=Distribution.model_construct(p99=e2e_p99))
    server = None if waiting_max is None else ServerPhase.model_construct(waiting_max=waiting_max)
    return PhaseSummary.model_construct(name=name, config={"load": load}, requests=Requests.model_construct(ok=10),
                                        throughput=Throughput.model_construct(output_tokens_per_s=tput,
                                                                              inputs_per_s=texts_per_s),
                                        latency_ms=latency, goodput=Goodput.model_construct(fraction=good),
                                        load=Load.model_construct(offered_rps=offered), server=server)


def test_each_batch_phase_is_compared_with_the_interactive_one() -> None:
    phases = [
        phase("warm", {"type": "concurrency", "concurrency": 2}, 1, 1, 1, 1, 1),  # closed loop: not the reference
        phase("live", {"type": "poisson", "rate": 4}, 500.0, 20.0, 40.0, 8.0, 1.0),
        phase("b64", {"type": "batch", "size": 64}, 1550.0, 600.0, 1640.0, 12.0, 0.25),
    ]
    (c,) = comparisons(phases)
    assert (c.phase, c.versus, c.batch_size, c.at_capacity) == ("b64", "live", 64, False)
    assert c.throughput_ratio == 3.1 and c.ttft_p99_ratio == 41.0 and c.itl_p50_ratio == 1.5
    assert sentences([c]) == ["Batches of 64 deliver 3.1× the output tokens/s of the interactive run, at 41.0× "
                              "its p99 TTFT and 1.5× its median inter-token latency; 25% of batched requests meet "
                              "the SLOs, against 100% interactive. The ratio holds at the 4.00 req/s the "
                              "interactive run was offered; sweep its rate to compare at its capacity."]


def test_with_a_sweep_the_batch_is_compared_at_the_interactive_capacity() -> None:
    phases = [
        phase("live@rate=2", {"type": "poisson", "rate": 2}, 250.0, 20.0, 30.0, 8.0, 1.0, 2.0),
        phase("live@rate=8", {"type": "poisson", "rate": 8}, 1000.0, 25.0, 60.0, 9.0, 0.97, 8.0),
        phase("live@rate=16", {"type": "poisson", "rate": 16}, 1400.0, 400.0, 2000.0, 14.0, 0.4, 16.0),
        phase("b64", {"type": "batch", "size": 64}, 2000.0, 600.0, 1500.0, 12.0, 0.25, waiting_max=32),
    ]
    (c,) = comparisons(phases)
    assert c.versus == "live@rate=8" and c.at_capacity and c.throughput_ratio == 2.0 and c.ttft_p99_ratio == 25.0
    (line,) = sentences([c])
    assert "of the interactive run at its measured capacity (live@rate=8, the fastest sweep point with ≥ 95% " \
           "goodput), at 25.0× its p99 TTFT" in line
    assert "Up to 32 batched requests waited in the server's queue" in line and "req/s the interactive" not in line


def test_no_interactive_phase_no_conclusion() -> None:
    assert comparisons([phase("b", {"type": "batch", "size": 8}, 1, 1, 1, 1, 1)]) == []


def test_the_conclusion_says_why_and_whether_it_is_an_estimate() -> None:
    live = phase("live", {"type": "poisson", "rate": 4}, 500.0, 20.0, 40.0, 8.0, 1.0)
    b64 = phase("b64", {"type": "batch", "size": 64}, 1550.0, 600.0, 1640.0, 12.0, 0.25)
    calm = Stress(source="estimate", basis="ITL …", memory_bound_share=1.0, mbu=0.62, mfu=0.008)
    busy = Stress(source="simulator", basis="…", memory_bound_share=0.4, mbu=0.5, mfu=0.3)
    (c,) = comparisons([live.model_copy(update={"stress": calm}), b64.model_copy(update={"stress": busy})])
    (line,) = sentences([c])
    assert ("Why (an estimate, not a measurement): the interactive run's step time was 100% memory-bound (MBU 62%, "
            "MFU 0.8%), each step reading all the weights for a few tokens, against 40% memory-bound (MBU 50%, "
            "MFU 30.0%) for the batches, whose tokens share each read.") in line
    (bare,) = comparisons([live, b64])
    assert "Why" not in sentences([bare])[0]  # nothing known of the stress: no cause given


def test_phases_that_generate_nothing_are_compared_on_texts_and_end_to_end_latency() -> None:
    phases = [
        phase("live", {"type": "poisson", "rate": 16}, 0.0, None, None, None, 1.0, offered=16, e2e_p99=20.0,
              texts_per_s=16.0),
        phase("b32", {"type": "batch", "size": 32, "pack": "inputs"}, 0.0, None, None, None, 1.0, e2e_p99=117.0,
              texts_per_s=272.0),
    ]
    (c,) = comparisons(phases)
    assert c.throughput_ratio is None and c.inputs_ratio == 17.0 and c.e2e_p99_ratio == 5.85
    assert sentences([c]) == ["Batches of 32 texts embed 17.0× the texts/s of the interactive run, at 5.8× its p99 "
                              "end-to-end latency; 100% of batched requests meet the SLOs, against 100% interactive. "
                              "The ratio holds at the 16.00 req/s the interactive run was offered."]
