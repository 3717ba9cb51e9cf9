"""Run history in a local SQLite file: each run's headline figures per phase, for trends and baselines.

Safe with concurrent writers (nightly jobs that finish together): WAL journal, a busy timeout, and each
run added in one immediate transaction; adding a run twice replaces it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ScenarioError
from harness.report.files import run_dirs
from harness.stats.repeats import METRICS
from harness.stats.schema import PhaseSummary
from harness.stats.thresholds import observed

DEFAULT_DB = Path("reports") / "history.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, started_at TEXT NOT NULL, path TEXT NOT NULL,
    complete INTEGER NOT NULL, thresholds_passed INTEGER NOT NULL, requests_ok INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS figures (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, phase TEXT NOT NULL, metric TEXT NOT NULL,
    value REAL NOT NULL, PRIMARY KEY (run_id, phase, metric));
CREATE INDEX IF NOT EXISTS runs_by_scenario ON runs (scenario, started_at);
"""


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(_SCHEMA)
        yield db
    finally:
        db.close()


def _row(run_dir: Path) -> tuple[tuple[Any, ...], list[tuple[str, str, float]]]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    run = summary["run"]
    phases = summary["phases"]
    passed = all(t["passed"] for p in phases for t in p.get("thresholds", []))
    ok = sum(p["requests"]["ok"] for p in phases)
    figures = []
    for phase in phases:
        stats = PhaseSummary.model_validate(phase)
        figures += [(phase["name"], m, v) for m in METRICS if (v := observed(m, stats)) is not None]
    head = (run["run_id"], run["scenario"], run.get("started_at") or "", str(run_dir.resolve()),
            int(run.get("complete", True)), int(passed), ok)
    return head, figures


def add(db_path: Path, path: Path) -> list[str]:
    """Add the run (or each run of a repeated run's folder); returns their run ids."""
    added = []
    with connect(db_path) as db:
        for run_dir in run_dirs(path):
            head, figures = _row(run_dir)
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM figures WHERE run_id = ?", (head[0],))
                db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", head)
                db.executemany("INSERT INTO figures VALUES (?, ?, ?, ?)", [(head[0], *f) for f in figures])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            added.append(head[0])
    return added


@dataclass(frozen=True, slots=True)
class Entry:
    run_id: str
    scenario: str
    started_at: str
    path: str
    good: bool  # complete, every threshold held, some request succeeded
    figures: dict[tuple[str, str], float]  # (phase, metric) → value


def entries(db_path: Path, scenario: str | None = None) -> list[Entry]:
    """Every run, oldest first (optionally of one scenario)."""
    with connect(db_path) as db:
        where, args = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        runs = db.execute(f"SELECT run_id, scenario, started_at, path, complete, thresholds_passed, requests_ok "
                          f"FROM runs {where} ORDER BY started_at, run_id", args).fetchall()
        figures: dict[str, dict[tuple[str, str], float]] = {}
        for run_id, phase, metric, value in db.execute(
                f"SELECT f.run_id, phase, metric, value FROM figures f JOIN runs USING (run_id) {where}", args):
            figures.setdefault(run_id, {})[(phase, metric)] = value
    return [Entry(r[0], r[1], r[2], r[3], bool(r[4] and r[5] and r[6]), figures.get(r[0], {})) for r in runs]


def baseline(db_path: Path, scenario: str, n: int) -> list[Path]:
    """The run directories of the last `n` good runs of `scenario` (for `harness compare`)."""
    good = [e for e in entries(db_path, scenario) if e.good]
    if not good:
        raise ScenarioError(f"{db_path}: no good run of scenario {scenario!r} in the history")
    paths = [Path(e.path) for e in good[-n:]]
    missing = [p for p in paths if not (p / "summary.json").is_file()]
    if missing:
        raise ScenarioError(f"{missing[0]}: a baseline run in the history is no longer on disk")
    return paths
