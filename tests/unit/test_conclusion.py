from harness.stats.conclusion import comparisons, sentences
from harness.stats.schema import Distribution, Goodput, PhaseLatencies, PhaseSummary, Requests, Throughput


def phase(name: str, load: dict, tput: float, ttft_p50: float, ttft_p99: float, itl: float,
          good: float) -> PhaseSummary:
    """Only the fields the comparison reads (model_construct skips validation of the rest)."""
    latency = PhaseLatencies.model_construct(ttft=Distribution.model_construct(p50=ttft_p50, p99=ttft_p99),
                                             itl=Distribution.model_construct(p50=itl))
    return PhaseSummary.model_construct(name=name, config={"load": load}, requests=Requests.model_construct(ok=10),
                                        throughput=Throughput.model_construct(output_tokens_per_s=tput),
                                        latency_ms=latency, goodput=Goodput.model_construct(fraction=good))


def test_each_batch_phase_is_compared_with_the_interactive_one() -> None:
    phases = [
        phase("warm", {"type": "concurrency", "concurrency": 2}, 1, 1, 1, 1, 1),  # closed loop: not the reference
        phase("live", {"type": "poisson", "rate": 4}, 500.0, 20.0, 40.0, 8.0, 1.0),
        phase("b64", {"type": "batch", "size": 64}, 1550.0, 600.0, 1640.0, 12.0, 0.25),
    ]
    (c,) = comparisons(phases)
    assert (c.phase, c.versus, c.batch_size) == ("b64", "live", 64)
    assert c.throughput_ratio == 3.1 and c.ttft_p99_ratio == 41.0 and c.itl_p50_ratio == 1.5
    assert sentences([c]) == ["Batches of 64 deliver 3.1× the output tokens/s of the interactive run, at 41.0× "
                              "its p99 TTFT and 1.5× its median inter-token latency; 25% of batched requests meet "
                              "the SLOs, against 100% interactive."]


def test_no_interactive_phase_no_conclusion() -> None:
    assert comparisons([phase("b", {"type": "batch", "size": 8}, 1, 1, 1, 1, 1)]) == []
