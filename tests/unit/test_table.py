from harness.config.scenario import SLO
from harness.report.table import render_table
from tests.helpers import phase_json
from tests.unit.test_stats import MS, rec


def _summary() -> dict:
    records = [rec(0, 0, [100, 110], completion=2, idx=i) for i in range(3)]
    records += [rec(0, 0, [], status="timeout", idx=3), rec(0, 0, [], status="http_error", idx=4)]
    records += [rec(0, 0, [50], status="cancelled", idx=5)]
    for r in records[3:]:
        r.end_ns = 60 * MS
    phase = {"name": "steady", **phase_json(records, SLO(ttft_ms=50))}
    return {"run": {"scenario": "tiny", "mode": "run"}, "phases": [phase], "comparison": {"conclusion": ["Done."]}}


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
    summary = _summary()
    summary["phases"] = [dict(summary["phases"][0], name=f"phase-number-{i}") for i in range(12)]
    text = render_table(summary)
    header = next(line for line in text.splitlines() if "phase-number-0" in line)
    assert all(f"phase-number-{i}" in header for i in range(12))


def test_two_phases_fit_an_80_column_terminal() -> None:
    summary = _summary()
    phase = summary["phases"][0]
    summary["phases"] = [dict(phase, name="interactive"), dict(phase, name="training-batch")]
    assert max(len(line) for line in render_table(summary).splitlines()[:-2]) <= 80  # the table, not the prose
