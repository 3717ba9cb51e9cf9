"""Run history in a local SQLite file: each run's headline figures per phase for trends, and everything
`harness compare` needs of it (its scenario's shape, per phase its measured requests in blocks, exact
per-request values), so a runner that keeps only this file compares correctly; old run folders are optional.

A run's standing decides whether it may be a baseline: complete, something succeeded, every threshold held,
the client kept up, and not flagged (a regression `harness compare` found) — or accepted by someone
(`harness history accept`), which overrides a flag or a broken threshold. A regression therefore never joins
the baseline by itself, and the alarm stays red until a person says the new level is the new normal.

Safe with concurrent writers (nightly jobs that finish together): WAL journal, a busy timeout, and each
run added in one immediate transaction; adding a run twice replaces it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.config.metric_registry import COMPARED, FOLLOWED, Latency, metric
from harness.doors import json_value
from harness.errors import ScenarioError
from harness.limits import HISTORY_CELL_BYTES
from harness.records_read import run_dirs
from harness.stats.compare import BLOCK_LATENCIES, ONLY_WHEN_MEASURED, Block, value
from harness.stats.noise import MIN_RUNS, RunSpread, spread
from harness.stats.schema import ThresholdResult, read_summary
from harness.stats.thresholds import observed
from harness.tools.compare import Noise, PhaseBlocks, Run, load_runs

DEFAULT_DB = Path("reports") / "history.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL, started_at TEXT NOT NULL, path TEXT NOT NULL,
    complete INTEGER NOT NULL, thresholds_passed INTEGER NOT NULL, requests_ok INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS figures (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, phase TEXT NOT NULL, metric TEXT NOT NULL,
    value REAL NOT NULL, PRIMARY KEY (run_id, phase, metric));
CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, phase TEXT NOT NULL, ord INTEGER NOT NULL,
    client_limited TEXT, thresholds TEXT NOT NULL, PRIMARY KEY (run_id, phase));
CREATE TABLE IF NOT EXISTS blocks (
    run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, phase TEXT NOT NULL, idx INTEGER NOT NULL,
    seconds REAL NOT NULL, tokens REAL NOT NULL, total INTEGER NOT NULL, failed INTEGER NOT NULL,
    ttft BLOB NOT NULL, tpot BLOB NOT NULL, e2e BLOB NOT NULL, itl BLOB NOT NULL,
    PRIMARY KEY (run_id, phase, idx));
CREATE INDEX IF NOT EXISTS runs_by_scenario ON runs (scenario, started_at);
"""
# Columns added after the first version: an older file gains them when opened (its runs keep no blocks, so
# they compare only while their folders exist).
_ADDED = {"client_limited": "INTEGER NOT NULL DEFAULT 0", "shape": "TEXT", "flagged": "TEXT",
          "accepted": "INTEGER NOT NULL DEFAULT 0", "labels": "TEXT"}
_ADDED_PHASES = {"limited_metrics": "TEXT"}  # JSON: the figures the client could have moved (null: older runs)
# null: none kept (no model thought first, or the run was added by an older version)
_ADDED_BLOCKS = {str(Latency.TTFT_ANSWER): "BLOB"}
_BLOB_COLUMNS = ", ".join(BLOCK_LATENCIES)  # a block's latencies, a column each (named as the Latency)
NOISE_RUNS = 10  # the last good runs of a scenario whose spread is its noise


# A block's latencies, inflated: a cell past this is refused, not inflated (a zlib bomb in one cell drove
# `compare --baseline-from-history` to 5.3 GB)


_DB_HINT = "--db names the history file `harness history add` keeps (default reports/history.sqlite)"


class _BadCell(ValueError):
    """A history cell that is not what the harness wrote: not zlib, past HISTORY_CELL_BYTES, not JSON."""


@contextlib.contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """The history database at `path`, made if absent; a file that is not one (or a cell the harness did not
    write) is a one-line ScenarioError naming it, wherever in the `with` block it is met."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path, timeout=60, isolation_level=None)
    except sqlite3.Error as exc:
        raise ScenarioError(f"{path}: cannot open a history database ({exc})", hint=_DB_HINT) from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(_SCHEMA)
        for table, added in (("runs", _ADDED), ("phases", _ADDED_PHASES), ("blocks", _ADDED_BLOCKS)):
            have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for column, kind in added.items():
                if column not in have:
                    with contextlib.suppress(sqlite3.OperationalError):  # another process added it just now
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        yield db
    except sqlite3.DatabaseError as exc:
        raise ScenarioError(f"{path}: not a history database the harness wrote ({exc})", hint=_DB_HINT) from None
    except _BadCell as exc:
        raise ScenarioError(f"{path}: {exc}", hint=_DB_HINT) from None
    finally:
        db.close()


def _pack(values: np.ndarray) -> bytes:
    return zlib.compress(np.asarray(values, dtype="<f8").tobytes())


def _unpack(blob: bytes | None) -> np.ndarray:
    if blob is None:
        return np.zeros(0)
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(blob, HISTORY_CELL_BYTES)
    except (zlib.error, TypeError) as exc:
        raise _BadCell(f"a block's latencies are not zlib data ({exc})") from None
    if inflate.unconsumed_tail or len(raw) % 8:
        raise _BadCell(f"a block's latencies inflate past {HISTORY_CELL_BYTES >> 20} MiB or are not float64s")
    return np.frombuffer(raw, dtype="<f8").astype(np.float64)


def _cell(text: str | None, what: str) -> object:
    """A JSON cell of the database, through the JSON door."""
    try:
        return json_value(text or "null")
    except ValueError as exc:
        raise _BadCell(f"a run's {what} is not JSON ({exc})") from None


@dataclass(frozen=True, slots=True)
class _Rows:
    head: dict[str, str | int | None]  # the runs table's columns
    figures: list[tuple[str, str, float]]
    phases: list[tuple[str, int, str | None, str, str]]
    blocks: list[tuple[str | int | float | bytes | None, ...]]


def _rows(run_dir: Path, flag: str | None) -> _Rows:
    summary = read_summary(run_dir / "summary.json")
    run, phases = summary.run, summary.phases
    figures = [(phase.name, m, v) for phase in phases for m in FOLLOWED if (v := observed(m, phase)) is not None]
    comparable = (run_dir / "requests.jsonl").is_file() and (run_dir / "scenario.yaml").is_file()
    loaded = load_runs([run_dir])[0] if comparable else None
    head: dict[str, str | int | None] = {
        "run_id": run.run_id, "scenario": run.scenario, "started_at": run.started_at or "",
        "path": str(run_dir.resolve()), "complete": int(run.complete),
        "thresholds_passed": int(all(t.passed for p in phases for t in p.thresholds)),
        "requests_ok": sum(p.requests.ok for p in phases),
        "client_limited": int(any(p.untrusted(m) for p in phases for m in COMPARED if metric(m).central)),
        "shape": json.dumps(loaded.shape) if loaded else None, "flagged": flag, "accepted": 0,
        "labels": json.dumps(run.labels) if run.labels else None}
    rows = [(p.name, k, (p.client_limited_reason or "late") if p.client_limited else None,
             json.dumps([t.to_json() for t in p.thresholds]), json.dumps(p.client_limited_metrics))
            for k, p in enumerate(phases)]
    packed: list[tuple[str | int | float | bytes | None, ...]] = [
        (name, i, b.seconds, b.tokens, b.total, b.failed,
         *(_pack(b.latencies[k]) if len(b.latencies[k]) or k not in ONLY_WHEN_MEASURED else None
           for k in BLOCK_LATENCIES))
        for name, phase in (loaded.phases.items() if loaded else []) for i, b in enumerate(phase.blocks)]
    return _Rows(head, figures, rows, packed)


def add(db_path: Path, path: Path, flag: str | None = None) -> list[str]:
    """Add the run (or each run of a repeated run's folder), flagged with a reason when `flag` is given (it
    may then be a baseline only once accepted); returns their run ids."""
    added = []
    with connect(db_path) as db:
        for run_dir in run_dirs(path):
            rows = _rows(run_dir, flag)
            run_id = str(rows.head["run_id"])
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))  # cascades to its figures and blocks
                columns = ", ".join(rows.head)
                db.execute(f"INSERT INTO runs ({columns}) VALUES ({', '.join('?' * len(rows.head))})",
                           tuple(rows.head.values()))
                db.executemany("INSERT INTO figures VALUES (?, ?, ?, ?)", [(run_id, *f) for f in rows.figures])
                db.executemany("INSERT INTO phases (run_id, phase, ord, client_limited, thresholds, limited_metrics) "
                               "VALUES (?, ?, ?, ?, ?, ?)", [(run_id, *p) for p in rows.phases])
                db.executemany(f"INSERT INTO blocks (run_id, phase, idx, seconds, tokens, total, failed, "
                               f"{_BLOB_COLUMNS}) VALUES ({', '.join('?' * (7 + len(BLOCK_LATENCIES)))})",
                               [(run_id, *b) for b in rows.blocks])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            added.append(run_id)
    return added


@dataclass(frozen=True, slots=True)
class Entry:
    run_id: str
    scenario: str
    started_at: str
    path: str
    complete: bool
    thresholds_passed: bool
    requests_ok: int
    client_limited: bool
    flagged: str | None
    accepted: bool
    comparable: bool  # the history holds its blocks: it compares without its folder
    figures: dict[tuple[str, str], float]  # (phase, metric) → value
    labels: dict[str, str] = field(default_factory=dict)  # the run's tags (--label)

    @property
    def standing(self) -> str:
        """good, accepted, or why it may not be a baseline."""
        if not self.complete:
            return "incomplete"
        if not self.requests_ok:
            return "nothing ok"
        if self.accepted:
            return "accepted"
        if self.flagged:
            return f"flagged: {self.flagged}"
        if not self.thresholds_passed:
            return "thresholds broken"
        return "client limited" if self.client_limited else "good"

    @property
    def good(self) -> bool:
        """May be a baseline."""
        return self.standing in ("good", "accepted")

    @property
    def judged_bad(self) -> bool:
        """Someone or something said this run was worse: a flag or a broken threshold, not accepted since."""
        return not self.accepted and (self.flagged is not None or not self.thresholds_passed)


def entries(db_path: Path, scenario: str | None = None) -> list[Entry]:
    """Every run, oldest first (optionally of one scenario)."""
    with connect(db_path) as db:
        where, args = ("WHERE scenario = ?", (scenario,)) if scenario else ("", ())
        runs = db.execute(
            "SELECT run_id, scenario, started_at, path, complete, thresholds_passed, requests_ok, client_limited, "
            "flagged, accepted, EXISTS (SELECT 1 FROM blocks b WHERE b.run_id = runs.run_id), labels "
            f"FROM runs {where} "
            "ORDER BY started_at, run_id", args).fetchall()
        figures: dict[str, dict[tuple[str, str], float]] = {}
        for run_id, phase, metric, value in db.execute(
                f"SELECT f.run_id, phase, metric, value FROM figures f JOIN runs USING (run_id) {where}", args):
            figures.setdefault(run_id, {})[(phase, metric)] = value
    return [Entry(r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5]), r[6], bool(r[7]), r[8], bool(r[9]), bool(r[10]),
                  figures.get(r[0], {}), _cell(r[11], "labels") if r[11] else {})  # type: ignore[arg-type]
            for r in runs]


def _ids(db: sqlite3.Connection, run: str) -> list[str]:
    """A run id, or a run directory / repeat folder on disk, as the run ids the history holds."""
    if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run,)).fetchone():
        return [run]
    path = Path(run)
    if path.is_dir():
        ids = [read_summary(d / "summary.json").run.run_id for d in run_dirs(path)]
        known = [i for i in ids if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (i,)).fetchone()]
        if known:
            return known
    raise ScenarioError(f"{run}: no such run in the history (a run id from `harness history show`, or its folder)")


def accept(db_path: Path, runs: Sequence[str]) -> list[str]:
    """Accept runs as baselines despite a flag or a broken threshold; returns their run ids."""
    with connect(db_path) as db:
        ids = [i for run in runs for i in _ids(db, run)]
        db.executemany("UPDATE runs SET accepted = 1 WHERE run_id = ?", [(i,) for i in ids])
    return ids


def baseline_entries(db_path: Path, scenario: str, n: int, exclude: Sequence[str] = ()) -> list[Entry]:
    """The last `n` runs of `scenario` that may be a baseline (empty: none), never those in `exclude` (the
    runs being compared, when they were added before)."""
    return [e for e in entries(db_path, scenario) if e.good and e.run_id not in exclude][-n:]


def _run_from_db(db: sqlite3.Connection, entry: Entry, where: str) -> Run:
    (shape,) = db.execute("SELECT shape FROM runs WHERE run_id = ?", (entry.run_id,)).fetchone()
    phases: dict[str, PhaseBlocks] = {}
    for name, limited, thresholds, moved in db.execute(
            "SELECT phase, client_limited, thresholds, limited_metrics FROM phases WHERE run_id = ? ORDER BY ord",
            (entry.run_id,)):
        cut = [Block(dict(zip(BLOCK_LATENCIES, map(_unpack, blobs), strict=True)), tokens, seconds, total, failed)
               for seconds, tokens, total, failed, *blobs in db.execute(
                   f"SELECT seconds, tokens, total, failed, {_BLOB_COLUMNS} FROM blocks "
                   "WHERE run_id = ? AND phase = ? ORDER BY idx", (entry.run_id, name))]
        phases[name] = PhaseBlocks(cut, limited, [ThresholdResult.model_validate(t)
                                                  for t in _cell(thresholds, "thresholds")],  # type: ignore[attr-defined]
                                   tuple(_cell(moved, "limited metrics")) if moved else ())  # type: ignore[arg-type]
    return Run(entry.run_id, where, _cell(shape, "shape"), phases)  # type: ignore[arg-type]


def baseline(db_path: Path, scenario: str, n: int, exclude: Sequence[str] = ()) -> list[Run]:
    """The last `n` runs of `scenario` that may be a baseline, as `harness compare` reads them: from the
    history's own blocks, or (runs added by an older version) from their folders while those exist."""
    chosen = baseline_entries(db_path, scenario, n, exclude)
    if not chosen:
        raise ScenarioError(f"{db_path}: no run of scenario {scenario!r} in the history may be a baseline "
                            "(none good; `harness history accept RUN` makes a flagged one a baseline)")
    return _runs(db_path, chosen)


def noise(db_path: Path, scenario: str, exclude: Sequence[str] = (), runs: int = NOISE_RUNS) -> Noise:
    """(phase, metric) → one run's spread over the last `runs` good runs of `scenario` whose blocks the
    history keeps (harness.stats.noise); empty with fewer than three."""
    chosen = [e for e in baseline_entries(db_path, scenario, runs, exclude) if e.comparable]
    kept = _runs(db_path, chosen) if len(chosen) >= MIN_RUNS else []
    out: dict[tuple[str, str], RunSpread] = {}
    for phase in kept[0].phases if kept else []:
        for name in COMPARED:
            values = [value(name, r.phases[phase].blocks) for r in kept if phase in r.phases]
            found = spread([v for v in values if v is not None], metric(name).absolute)
            if found is not None:
                out[(phase, name)] = found
    return out


def _runs(db_path: Path, chosen: Sequence[Entry]) -> list[Run]:
    runs = []
    with connect(db_path) as db:
        for entry in chosen:
            if entry.comparable:
                runs.append(_run_from_db(db, entry, f"{db_path}:{entry.run_id}"))
            elif (Path(entry.path) / "requests.jsonl").is_file():
                runs += load_runs([Path(entry.path)])
            else:
                raise ScenarioError(f"{entry.path}: a baseline run added without its requests is no longer on disk "
                                    "(add runs with this version to keep them in the history)")
    return runs
