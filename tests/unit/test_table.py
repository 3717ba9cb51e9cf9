from harness.config.scenario import SLO
from harness.report.table import render_table
from harness.stats.schema import Summary
from tests.helpers import MS, phase_json, rec, summary_of


def _phase() -> dict:
    records = [rec(0, 0, [100, 110], completion=2, idx=i) for i in range(3)]
    records += [rec(0, 0, [], status="timeout", idx=3), rec(0, 0, [], status="http_error", idx=4)]
    records += [rec(0, 0, [50], status="cancelled", idx=5)]
    for r in records[3:]:
        r.end_ns = 60 * MS
    return {"name": "steady", **phase_json(records, SLO(ttft_ms=50))}


def _summary(*names: str) -> Summary:
    return summary_of([{**_phase(), "name": name} for name in names or ("steady",)], ["Done."])


def test_table_shows_each_outcome_and_ends_with_the_conclusion() -> None:
    text = render_table(_summary())
    lines = text.splitlines()
    assert lines[0] == "tiny"
    outcome = next(line for line in lines if line.strip().startswith("ok / errored / cancelled"))
    assert outcome.split()[-5:] == ["3", "/", "2", "/", "1"]
    goodput = next(line for line in lines if "goodput" in line)
    assert goodput.split()[-2:] == ["0.00", "(0%)"]  # TTFT 100 ms against a 50 ms SLO
    assert lines[-1] == "Done."


def test_table_never_wraps_however_many_phases() -> None:
    text = render_table(_summary(*(f"phase-number-{i}" for i in range(12))))
    header = next(line for line in text.splitlines() if "phase-number-0" in line)
    assert all(f"phase-number-{i}" in header for i in range(12))


def test_two_phases_fit_an_80_column_terminal() -> None:
    summary = _summary("interactive", "training-batch")
    assert max(len(line) for line in render_table(summary).splitlines()[:-2]) <= 80  # the table, not the prose


def test_slos_failures_and_rows_that_apply() -> None:
    """Each SLO the scenario set is a row, ✓ or ✗ by the phase's p99; failures show their top causes; rows that
    cannot apply (batch time without batches, failures without any) are left out."""
    from harness.config.scenario import parse_scenario
    from harness.report.table import render_table
    from harness.tools.predict import predict

    scenario = parse_scenario({"name": "t", "slo": {"ttft_ms": "40ms", "tpot_ms": 50},
                               "workload": {"prompt_tokens": 64, "output_tokens": 8},
                               "phases": [{"name": "a", "load": {"type": "poisson", "rate": 4, "requests": 20}}]},
                              "test")
    summary = predict(scenario)
    text = render_table(summary)
    assert "TTFT p99 ≤ 40 ms" in text and "TPOT p99 ≤ 50 ms" in text
    ttft_p99 = summary.phases[0].latency_ms.ttft.p99
    assert ttft_p99 is not None
    assert ("✓" if ttft_p99 <= 40 else "✗") in text.split("TTFT p99 ≤ 40 ms")[1].splitlines()[0]
    assert "batch time" not in text and "failures, top causes" not in text
    data = summary.to_json()
    data["phases"][0]["requests"]["failure_reasons"] = {"HTTP 404 not_found_error": 10, "timeout": 2, "x": 1}
    line = next(row for row in render_table(Summary.from_json(data)).splitlines() if "failures, top causes" in row)
    assert "HTTP 404 not_found_error ×10, timeout ×2" in line and "x ×1" not in line
