"""Run history on real SQLite files: concurrent writers lose nothing, good runs make the baseline, the
trends page draws every series."""

from __future__ import annotations

import base64
import json
import multiprocessing
import re
from pathlib import Path

import pytest

from harness.config.scenario import parse_scenario
from harness.tools import history
from harness.tools.predict import predict


@pytest.fixture(scope="module")
def summary() -> dict:
    return predict(parse_scenario({"name": "hist", "workload": {"prompt_tokens": 32, "output_tokens": 8},
                                   "phases": [{"name": "open", "load": {"type": "constant", "rate": 10,
                                                                        "requests": 10}}]}, "test")).to_json()


def _runs(tmp: Path, summary: dict, n: int, prefix: str = "r", bad: frozenset[int] = frozenset()) -> list[Path]:
    dirs = []
    for i in range(n):
        run_dir = tmp / f"{prefix}{i:03d}"
        run_dir.mkdir(parents=True)
        started = f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00"
        run = {**summary["run"], "run_id": f"{prefix}{i:03d}", "started_at": started, "complete": i not in bad}
        (run_dir / "summary.json").write_text(json.dumps({**summary, "run": run}))
        dirs.append(run_dir)
    return dirs


def _add_all(args: tuple[str, list[str]]) -> None:
    db, dirs = args
    for d in dirs:
        history.add(Path(db), Path(d))


def test_four_processes_adding_at_once_lose_no_run(tmp_path: Path, summary: dict) -> None:
    dirs = _runs(tmp_path, summary, 40)
    db = tmp_path / "history.sqlite"
    chunks = [(str(db), [str(d) for d in dirs[k::4]]) for k in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_add_all, chunks)
    entries = history.entries(db)
    assert sorted(e.run_id for e in entries) == [d.name for d in dirs]
    assert all(("open", "ttft_p50") in e.figures for e in entries)
    history.add(db, dirs[0])  # adding again replaces, never duplicates
    assert len(history.entries(db)) == 40


def test_the_baseline_is_the_last_good_runs(tmp_path: Path, summary: dict) -> None:
    dirs = _runs(tmp_path, summary, 8, bad=frozenset({6}))
    db = tmp_path / "h.sqlite"
    for d in dirs:
        history.add(db, d)
    assert [e.run_id for e in history.baseline_entries(db, "hist", 3)] == ["r004", "r005", "r007"]  # r006 stopped
    with pytest.raises(Exception, match="no run of scenario 'other' in the history may be a baseline"):
        history.baseline(db, "other", 3)
    with pytest.raises(Exception, match="r007: a baseline run added without its requests is no longer on disk"):
        history.baseline(db, "hist", 1)  # summaries only (no requests.jsonl): nothing to compare from


def test_a_flagged_run_is_no_baseline_until_accepted(tmp_path: Path, summary: dict) -> None:
    """The alarm stays red: a regression never joins the baseline by itself; a person accepts it."""
    dirs = _runs(tmp_path, summary, 4)
    db = tmp_path / "h.sqlite"
    for d in dirs[:3]:
        history.add(db, d)
    history.add(db, dirs[3], flag="regression found by harness compare")
    assert [e.run_id for e in history.baseline_entries(db, "hist", 2)] == ["r001", "r002"]
    (last,) = [e for e in history.entries(db) if e.run_id == "r003"]
    assert last.standing == "flagged: regression found by harness compare" and not last.good and last.judged_bad
    assert history.accept(db, [str(dirs[3])]) == ["r003"]  # by folder, or by id
    assert [e.run_id for e in history.baseline_entries(db, "hist", 2)] == ["r002", "r003"]
    # The run being compared, added already, is never its own baseline.
    assert [e.run_id for e in history.baseline_entries(db, "hist", 2, exclude=["r003"])] == ["r001", "r002"]
    with pytest.raises(Exception, match="nope: no such run in the history"):
        history.accept(db, ["nope"])


def test_a_client_limited_run_is_no_baseline(tmp_path: Path, summary: dict) -> None:
    limited = {**summary, "phases": [{**p, "client_limited": True, "client_limited_reason": "late"}
                                     for p in summary["phases"]]}
    db = tmp_path / "h.sqlite"
    history.add(db, _runs(tmp_path, summary, 1)[0])
    history.add(db, _runs(tmp_path, limited, 1, prefix="late")[0])
    assert sorted((e.run_id, e.standing) for e in history.entries(db)) == [("late000", "client limited"),
                                                                            ("r000", "good")]
    assert [e.run_id for e in history.baseline_entries(db, "hist", 3)] == ["r000"]


def test_a_run_whose_client_moved_only_a_tail_may_be_a_baseline(tmp_path: Path, summary: dict) -> None:
    """Figure by figure: a run whose client could have moved its ITL p99 is still a baseline for its medians (the
    p99 stays untrusted in every comparison against it); one whose ITL median moved is not."""
    def moved(figures: list[str]) -> dict:
        return {**summary, "phases": [{**p, "client_limited": True, "client_limited_reason": "late",
                                       "client_limited_metrics": figures} for p in summary["phases"]]}

    db = tmp_path / "h.sqlite"
    history.add(db, _runs(tmp_path, moved(["itl_p99"]), 1, prefix="tail")[0])
    history.add(db, _runs(tmp_path, moved(["itl_p50", "itl_p99"]), 1, prefix="median")[0])
    assert sorted((e.run_id, e.standing) for e in history.entries(db)) == [("median000", "client limited"),
                                                                            ("tail000", "good")]


def test_an_older_history_file_gains_the_new_columns(tmp_path: Path, summary: dict) -> None:
    import sqlite3

    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as old:
        old.executescript("CREATE TABLE runs (run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, started_at TEXT NOT "
                          "NULL, path TEXT NOT NULL, complete INTEGER NOT NULL, thresholds_passed INTEGER NOT NULL, "
                          "requests_ok INTEGER NOT NULL);"
                          "INSERT INTO runs VALUES ('old1', 'hist', '2026-01-01', '/gone', 1, 1, 5);")
    history.add(db, _runs(tmp_path, summary, 1)[0])
    assert [(e.run_id, e.standing) for e in history.entries(db)] == [("old1", "good"), ("r000", "good")]


def test_history_show_prints_runs_and_draws_trends(tmp_path: Path, summary: dict) -> None:
    from click.testing import CliRunner

    from harness.cli import main

    dirs = _runs(tmp_path, summary, 6, bad=frozenset({2}))
    db = tmp_path / "h.sqlite"
    for d in dirs[:5]:
        assert CliRunner().invoke(main, ["history", "add", str(d), "--db", str(db)]).exit_code == 0
    flagged = CliRunner().invoke(main, ["history", "add", str(dirs[5]), "--db", str(db), "--flag", "regression"])
    assert flagged.exit_code == 0 and "(flagged: regression)" in flagged.output
    page = tmp_path / "trends.html"
    result = CliRunner().invoke(main, ["history", "show", "--db", str(db), "--metric", "ttft_p50", "--metric",
                                       "error_rate", "--baseline", "2", "--html", str(page)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line[:2] for line in lines[:6]] == ["✓ ", "✓ ", "✗ ", "✓★", "✓★", "✗ "] and "open: ttft_p50" in lines[0]
    assert "[incomplete]" in lines[2] and "[flagged: regression]" in lines[5] and "[good]" in lines[4]
    table = page.read_text()
    assert "<td>r005</td><td>flagged: regression</td><td></td>" in table
    assert "<td>r004</td><td>good</td><td>baseline</td>" in table
    accepted = CliRunner().invoke(main, ["history", "accept", "r005", "--db", str(db)])
    assert accepted.exit_code == 0 and "accepted 1 run as baseline: r005" in accepted.output
    again = CliRunner().invoke(main, ["history", "show", "--db", str(db), "--baseline", "2"]).output.splitlines()
    assert again[5].startswith("✓★") and "[accepted]" in again[5] and again[3].startswith("✓ ")
    missing = CliRunner().invoke(main, ["history", "accept", "nope", "--db", str(db)])
    assert missing.exit_code == 2 and "nope: no such run in the history" in missing.output
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page.read_text())
    assert len(images) == 2 and all(base64.b64decode(b)[:4] == b"\x89PNG" for b in images)
