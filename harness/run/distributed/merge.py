"""`harness merge`: the run directories of a sharded run's shards joined into one run directory.

The statistics are computed once, from the merged records (never from averaged percentiles). Each shard's
records are moved onto the first shard's clock through the wall-clock anchors both kept (hosts are assumed
NTP-synchronised); each phase's self-check is the worst of its shards' (client-limited if any shard was).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from harness.config.scenario import Scenario, load_scenario
from harness.doors import json_value
from harness.errors import ScenarioError
from harness.records import RecordWriter, RequestRecord, write_parquet
from harness.records_read import read_records
from harness.run.distributed.sharding import SHARD_HEADER
from harness.run.result import RunResult
from harness.stats.schema import (
    ClientHealth,
    Comparison,
    EndpointInfo,
    MergedShard,
    PhaseSummary,
    RunHeader,
    ShardInfo,
    ShardLoss,
    Summary,
    read_summary,
)
from harness.stats.server import read_server_metrics
from harness.stats.summary import PhaseRun, build_summary
from harness.stats.verdict import RANK, ClientCheck, blamed, saved_check
from harness.voice import QUIET, Voice
from harness.workload.plan import plan_phase
from harness.workload.shards import Shard, shares, skew_ms

_TIMES = ("intended_ns", "sent_ns", "first_token_ns", "first_content_ns", "last_token_ns", "end_ns")


@dataclass(frozen=True)
class ShardRun:
    run_dir: Path
    scenario_text: str
    saved: Summary
    records: list[RequestRecord]
    # What the parent of --workers/--ray saw of this worker (by hand: nothing)
    loss: ShardLoss | None = None  # it died: what was lost
    silent_max_s: float | None = None  # its longest silence past 2 s (SILENT_S)
    silences: dict[str, float] | None = None  # phase -> its longest silence in it
    records_at: str | None = None  # where it wrote its own records

    @property
    def shard(self) -> ShardInfo:
        assert self.saved.run.shard is not None, "read_shard refuses a run that is not a shard"
        return self.saved.run.shard

    @property
    def clock_offset_ns(self) -> int:
        """Monotonic to the coordinator's wall time: the anchor, and the measured skew to the coordinator
        where it is known to exceed both its uncertainty and the tolerance (a parent slow to answer makes a
        long round trip and an offset that means nothing: then the wall clocks, NTP-synchronised, are
        trusted)."""
        anchor = self.saved.run.anchor
        assert anchor is not None, "a shard's header always has its anchor"
        skew = skew_ms(self.shard.clock_offset_ms, self.shard.clock_uncertainty_ms)
        return anchor.wall_ns - anchor.monotonic_ns + int(skew * 1e6)

    def phase(self, name: str) -> PhaseSummary | None:
        return next((p for p in self.saved.phases if p.name == name), None)


def killed_summary(header: RunHeader, stopped: str) -> Summary:
    """A shard that ended before writing its summary: its header, said incomplete, and no phases."""
    run = header.changed(complete=False, stopped=stopped)
    return Summary(run=run, phases=[], comparison=Comparison(phases=[], conclusion=[]))


def read_shard(run_dir: Path, voice: Voice = QUIET) -> ShardRun:
    """A shard's run directory; one killed before its summary (only `shard.json`, written at its start, and
    its records) is read as an incomplete shard."""
    summary, records = run_dir / "summary.json", run_dir / "requests.jsonl"
    if summary.is_file() and records.is_file():
        saved = read_summary(summary)
    elif (run_dir / SHARD_HEADER).is_file():
        try:
            header = RunHeader.model_validate(json_value((run_dir / SHARD_HEADER).read_bytes())["run"])  # type: ignore[index]
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise ScenarioError(f"{run_dir / SHARD_HEADER}: not a shard's header ({type(exc).__name__})") from None
        saved = killed_summary(header, "the shard ended before writing its summary")
        voice.warn(f"{run_dir}: no summary.json (the shard was killed?): its records are merged, the run is incomplete")
    else:
        raise ScenarioError(f"{run_dir}: not a finished run directory (no summary.json or requests.jsonl)")
    if saved.run.shard is None:
        raise ScenarioError(f"{run_dir}: not a shard (run with --shard i/N)")
    return ShardRun(run_dir, (run_dir / "scenario.yaml").read_text(encoding="utf-8"), saved,
                    list(read_records(records, voice)) if records.is_file() else [])


def _counted(shard: ShardRun, scenario: Scenario) -> ShardRun:
    """A shard by hand killed before its summary, with what it lost counted from its records against its plan
    (no parent saw it): it died in the phase of its last record (the next, when that one's share is all
    there), and its share of that phase and those after without a record is lost — in flight or never sent,
    which no one can tell apart without a parent (`in_flight` 0, both in `never_sent`; null where a phase is
    bound by time)."""
    if shard.loss is not None or shard.saved.phases or shard.saved.run.complete is not False:
        return shard
    me = Shard(shard.shard.index, shard.shard.count)
    try:
        counts = shares([plan_phase(scenario, i, "count") for i in range(len(scenario.phases))], me)
    except (ScenarioError, OSError, ValueError):  # its plan cannot be rebuilt here (a trace gone): counted as before
        return shard
    names = [p.name for p in scenario.phases]
    have = [sum(r.phase == name for r in shard.records) for name in names]
    k = max((i for i, n in enumerate(have) if n), default=0)
    if counts[k] is not None and have[k] >= (counts[k] or 0):
        k += 1
    if k >= len(names):
        return shard
    rest = [None if s is None else s - h for s, h in zip(counts[k:], have[k:], strict=True)]
    lost = None if None in rest else sum(n or 0 for n in rest)
    n = len(shard.records)
    return dataclasses.replace(shard, loss=ShardLoss(phase=names[k], sent=n, ended=n, in_flight=0, never_sent=lost))


def _check_complete(shards: Sequence[ShardRun]) -> None:
    """One run's shards, every one of them, each once."""
    first = shards[0]
    count = first.shard.count
    for s in shards:
        if s.saved.run.run_id != first.saved.run.run_id or s.shard.count != count:
            raise ScenarioError(f"{s.run_dir}: a shard of another run than {first.run_dir} (run id or N differs)")
        if s.scenario_text != first.scenario_text:
            raise ScenarioError(f"{s.run_dir}: its scenario.yaml differs from {first.run_dir}'s")
    seen = sorted(s.shard.index for s in shards)
    if seen != list(range(count)):
        missing = sorted(set(range(count)) - set(seen))
        raise ScenarioError(f"shards of {count}: {'missing ' + str(missing) if missing else 'one given twice'}")


def _shifted(rec: RequestRecord, by_ns: int) -> RequestRecord:
    moved = dataclasses.replace(rec, chunk_ns=[t + by_ns for t in rec.chunk_ns])
    for name in _TIMES:
        value = getattr(rec, name)
        if value is not None:
            setattr(moved, name, value + by_ns)
    return moved


def worst(checks: Sequence[ClientCheck]) -> ClientCheck:
    """The shards' self-checks as one: the worst reading of each, the worst verdict with its shard's
    reason."""
    def most(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if known else None

    bad = max(checks, key=lambda c: RANK[c.live_verdict])
    cpu = [c.cpu_seconds for c in checks if c.cpu_seconds is not None]
    def most_of(curves: list[tuple[float, ...] | None]) -> tuple[float, ...] | None:
        """Each quantile at its worst shard's: a lag no shard's tokens exceeded more often than that."""
        known = [c for c in curves if c is not None]
        return tuple(max(q) for q in zip(*known, strict=True)) if known and len(known) == len(curves) else None

    return ClientCheck(most([c.loop_lag_p99_ms for c in checks]), most([c.cpu_share for c in checks]),
                       checks[0].loop_lag_bound_ms, checks[0].cpu_bound, sum(cpu) if cpu else None,
                       most([c.runq_share for c in checks]), most([c.load_per_core for c in checks]),
                       bad.live_verdict, bad.live_reason,
                       loop_wait_quantiles_ms=most_of([c.loop_wait_quantiles_ms for c in checks]),
                       loop_tick_quantiles_ms=most_of([c.loop_tick_quantiles_ms for c in checks]),
                       max_shift=checks[0].max_shift)


def merge_shards(run_dirs: Sequence[Path], out: Path, voice: Voice = QUIET) -> RunResult:
    return merge_runs([read_shard(d, voice) for d in run_dirs], out)


@dataclass(frozen=True, slots=True)
class ParentSaw:
    """What the parent of --workers/--ray knows of the whole run that no shard's header holds."""

    endpoint: EndpointInfo | None  # as the parent resolved it (the bundled simulator is its own)
    coordinator: ClientHealth | None  # its own self-check
    stopped: str | None  # a signal it was stopped by (a worker's death is said per shard)


def merged_header(shards: Sequence[ShardRun], parent: ParentSaw | None = None) -> RunHeader:
    """The first shard's header for the run, with one line per shard (what it measured of its own start, how
    it ended, what its parent saw of it), complete only if every shard was; with a parent, what it saw."""
    per = [MergedShard(**{**s.shard.model_dump(), "run_dir": str(s.run_dir), "records": len(s.records),
                          "complete": s.saved.run.complete, "stopped": s.saved.run.stopped, "loss": s.loss,
                          "silent_max_s": s.silent_max_s, "records_at": s.records_at, "silences": s.silences})
           for s in shards]
    return shards[0].saved.run.changed(**{
        "shard": None, "shards": per, "complete": all(s.saved.run.complete for s in shards),
        "stopped": next((s.saved.run.stopped for s in shards if s.saved.run.stopped), None),
        **({} if parent is None else {"endpoint": parent.endpoint, "coordinator": parent.coordinator,
                                      "stopped": parent.stopped})})


def merge_runs(shards: Sequence[ShardRun], out: Path, parent: ParentSaw | None = None) -> RunResult:
    """The shards (every one of one run) as one run directory `out`."""
    shards = sorted(shards, key=lambda s: s.shard.index)
    _check_complete(shards)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(shards[0].scenario_text, encoding="utf-8")
    scenario = load_scenario(out / "scenario.yaml")
    shards = [_counted(s, scenario) for s in shards]
    offsets = [s.clock_offset_ns - shards[0].clock_offset_ns for s in shards]  # once a shard, not a record
    records = sorted((_shifted(r, by) for s, by in zip(shards, offsets, strict=True) for r in s.records),
                     key=lambda r: (r.intended_ns, r.request_id))
    phases = _phase_runs(scenario, shards, records)
    header = merged_header(shards, parent)
    rows = read_server_metrics(shards[0].run_dir)  # every shard scraped the same server: the first one's
    summary = build_summary(scenario, header, phases, rows, shards[0].saved.server_metrics)
    summary = summary.changed(phases=[frozen(p, shards) for p in summary.phases])
    if any(p.incomplete for p in summary.phases):  # a phase whose load was not the one planned: nor is the run
        summary = summary.changed(run=summary.run.changed(complete=False))
    with RecordWriter(out) as writer:
        for rec in records:
            writer.write(rec)
    if records:
        write_parquet(out / "requests.parquet", records)
    _copy_rows(shards[0].run_dir, out)
    return RunResult(out, summary, records, rows)


def _phase_runs(scenario: Scenario, shards: Sequence[ShardRun], records: list[RequestRecord]) -> list[PhaseRun]:
    runs = []
    for phase in scenario.phases:
        mine = [r for r in records if r.phase == phase.name]
        if not mine:
            continue
        saved = [s.phase(phase.name) for s in shards]
        cfg = scenario.client
        checks = [saved_check(p, cfg.loop_lag_bound_ms, cfg.cpu_bound, cfg.max_shift) for p in saved]
        runs.append(PhaseRun(phase, mine, worst(checks), saved[0].trace if saved[0] else None))
    return runs


def frozen(phase: PhaseSummary, shards: Sequence[ShardRun]) -> PhaseSummary:
    """A client-limited phase whose lateness a worker's freeze explains (its parent heard nothing from it for
    seconds while it was in the phase: SIGSTOP, a stuck process) says so, instead of guessing at the
    server."""
    silent = [(s.shard.index, seconds) for s in shards if (seconds := (s.silences or {}).get(phase.name))]
    if not silent or not phase.client_limited:
        return phase
    index, seconds = max(silent, key=lambda x: x[1])
    return phase.changed(client_limited_reason=blamed(
        phase.client_limited_reason or "", f"worker {index} was frozen for {seconds:.1f} s in this phase (it said "
        "nothing to its parent: SIGSTOP, or stuck): its lateness is its own"))


def _copy_rows(src: Path, out: Path) -> None:
    if (src / "server_metrics.csv").is_file():
        (out / "server_metrics.csv").write_bytes((src / "server_metrics.csv").read_bytes())
