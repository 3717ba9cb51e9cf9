"""`harness merge`: shard directories joined; statistics from the merged records equal one run's, bit for bit."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.scenario import parse_scenario
from harness.errors import ScenarioError
from harness.records import RecordWriter, RequestRecord
from harness.report.notes import notes
from harness.run.distributed.merge import merge_runs, merge_shards, read_shard
from harness.stats.schema import Anchor, RunHeader, ShardInfo, ShardLoss
from harness.stats.summary import PhaseRun, build_summary
from harness.stats.verdict import ClientCheck
from harness.tools.predict import predict_runs

SCENARIO = {"name": "m", "seed": 5, "workload": {"prompt_tokens": 64, "output_tokens": 16},
            "phases": [{"name": "live", "load": {"type": "poisson", "rate": 10, "requests": 30}},
                       {"name": "bulk", "load": {"type": "batch", "size": 8, "batches": 2}}]}
SKEW_NS = 7_000_000_123  # shard 1's monotonic clock runs this far behind shard 0's


def write_shard(run_dir: Path, records: list[RequestRecord], index: int, offset_ns: int, verdict: str) -> None:
    """A shard's run directory as `harness run --shard` leaves it, its clock `offset_ns` off shard 0's."""
    scenario = parse_scenario(SCENARIO, "test")
    moved = [_shift(rec, -offset_ns) for rec in records]
    with RecordWriter(run_dir) as writer:
        for rec in moved:
            writer.write(rec)
    (run_dir / "scenario.yaml").write_text(scenario.to_yaml(), encoding="utf-8")
    header = RunHeader(run_id="abcd0123", scenario="m", harness_version="t", seed=5,
                       anchor=Anchor(monotonic_ns=1_000 - offset_ns, wall_ns=1_000),
                       shard=ShardInfo(index=index, count=2, start_at=1.0))
    check = ClientCheck(1.0 + index, 0.2, live_verdict=verdict,  # type: ignore[arg-type]
                        live_reason="" if verdict == "ok" else "saturated: CPU 97%")
    summary = build_summary(scenario, header, [PhaseRun(p, [r for r in moved if r.phase == p.name], check)
                                               for p in scenario.phases])
    (run_dir / "summary.json").write_text(json.dumps(summary.to_json()), encoding="utf-8")


def _shift(rec: RequestRecord, by_ns: int) -> RequestRecord:
    def moved(t: int | None) -> int | None:
        return None if t is None else t + by_ns

    return dataclasses.replace(rec, intended_ns=rec.intended_ns + by_ns, sent_ns=moved(rec.sent_ns),
                               first_token_ns=moved(rec.first_token_ns), first_content_ns=moved(rec.first_content_ns),
                               last_token_ns=moved(rec.last_token_ns), end_ns=rec.end_ns + by_ns,
                               chunk_ns=[t + by_ns for t in rec.chunk_ns])


@pytest.fixture
def shards(tmp_path: Path) -> tuple[list[Path], list[RequestRecord]]:
    _, runs = asyncio.run(predict_runs(parse_scenario(SCENARIO, "test")))
    records = [r for run in runs for r in run.records]
    dirs = [tmp_path / "s0", tmp_path / "s1"]
    write_shard(dirs[0], records[0::2], 0, 0, "ok")
    write_shard(dirs[1], records[1::2], 1, SKEW_NS, "saturated")
    return dirs, records


def test_merged_statistics_equal_one_run_of_the_same_records(shards: tuple[list[Path], list[RequestRecord]],
                                                             tmp_path: Path) -> None:
    dirs, records = shards
    merged = merge_shards(dirs, tmp_path / "out")
    assert sorted(r.request_id for r in merged.records) == sorted(r.request_id for r in records)
    assert {r.request_id: r.chunk_ns for r in merged.records} == {r.request_id: r.chunk_ns for r in records}
    scenario = parse_scenario(SCENARIO, "test")
    worst = ClientCheck(2.0, 0.2, live_verdict="saturated", live_reason="saturated: CPU 97%")
    alone = build_summary(scenario, RunHeader(run_id="x", scenario="m", harness_version="t", seed=5),
                          [PhaseRun(p, [r for r in records if r.phase == p.name], worst) for p in scenario.phases])
    for mine, theirs in zip(merged.summary.to_json()["phases"], alone.to_json()["phases"], strict=True):
        assert mine == theirs  # percentiles from the merged records, and client-limited as the worst shard
    assert merged.summary.phases[0].client_limited
    assert [s.index for s in merged.summary.run.shards or []] == [0, 1]
    assert (tmp_path / "out" / "requests.jsonl").is_file()


def test_a_missing_or_foreign_shard_is_named(shards: tuple[list[Path], list[RequestRecord]], tmp_path: Path) -> None:
    dirs, _ = shards
    with pytest.raises(ScenarioError, match=r"missing \[1\]"):
        merge_shards(dirs[:1], tmp_path / "a")
    summary = json.loads((dirs[1] / "summary.json").read_text())
    summary["run"]["run_id"] = "other"
    (dirs[1] / "summary.json").write_text(json.dumps(summary))
    result = CliRunner().invoke(main, ["merge", str(dirs[0]), str(dirs[1]), "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "a shard of another run" in result.output


def test_a_shard_killed_before_its_summary_is_merged_as_incomplete(
        shards: tuple[list[Path], list[RequestRecord]], tmp_path: Path) -> None:
    """A shard on another host killed mid-run leaves `shard.json` (written before its start) and the records it
    took; merged, its records count on its own clock, the run is incomplete and `harness merge` exits 3."""
    dirs, records = shards
    summary = json.loads((dirs[1] / "summary.json").read_text())
    (dirs[1] / "summary.json").unlink()
    (dirs[1] / "shard.json").write_text(json.dumps({"run": summary["run"]}))
    with (dirs[1] / "requests.jsonl").open("a") as f:
        f.write('{"request_id": "torn')  # killed while writing a record
    result = CliRunner().invoke(main, ["merge", str(dirs[0]), str(dirs[1]), "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert "no summary.json" in result.output and "torn last line" in result.output
    merged = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert not merged["run"]["complete"]
    assert merged["run"]["shards"][1]["stopped"] == "the shard ended before writing its summary"
    assert merged["phases"][-1]["incomplete"] == "stopped (the shard ended before writing its summary)"
    out = [json.loads(line) for line in (tmp_path / "out" / "requests.jsonl").read_text().splitlines()]
    assert {r["request_id"]: r["chunk_ns"] for r in out} == {r.request_id: r.chunk_ns for r in records}


def test_a_late_phase_and_a_dead_shard_mark_the_phases_they_touch(
        shards: tuple[list[Path], list[RequestRecord]], tmp_path: Path) -> None:
    """A shard by hand that began `bulk` 400 ms after its planned start is named in that phase's warnings (and
    not for 20 ms); a worker that died in `live` marks `live` and every phase after it incomplete."""
    dirs, _ = shards
    saved = json.loads((dirs[1] / "summary.json").read_text())
    saved["run"]["shard"] |= {"phase_slack_s": 5.0, "phase_late_ms": {"live": 20.0, "bulk": 400.0}}
    saved["run"] |= {"complete": False, "stopped": "worker died (SIGKILL)"}
    (dirs[1] / "summary.json").write_text(json.dumps(saved))
    shards_read = [read_shard(d) for d in dirs]  # what the parent of the workers saw of the one that died:
    shards_read[1] = dataclasses.replace(shards_read[1], loss=ShardLoss(phase="live", sent=9, ended=7, in_flight=2,
                                                                        never_sent=11))
    merged = merge_runs(shards_read, tmp_path / "out").summary
    live, bulk = merged.phases
    assert live.warnings == [] and len(bulk.warnings) == 1 and "shard 1/2 began it 400 ms after" in bulk.warnings[0]
    assert live.incomplete == "shard 1/2 died in it" and bulk.incomplete == "shard 1/2 died in phase live, before it"
    lines = notes(merged)
    assert "phase bulk is incomplete: shard 1/2 died in phase live, before it" in lines
    assert merged.run.shards is not None and merged.run.shards[1].phase_late_ms == {"live": 20.0, "bulk": 400.0}
