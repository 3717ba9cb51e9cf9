"""The record sink and writer: no record is lost to a watcher's bug, to text a file cannot hold, to a full disk
or to a folder deleted under the run — each is kept, counted and said once."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from harness.records import RecordWriter, RequestRecord
from harness.records_read import read_records
from harness.redact import redactor
from harness.run.observe import PhaseStart
from harness.run.rescue import rescue
from harness.run.sink import RecordSink
from harness.voice import Heard


def record(i: int, message: str = "") -> RequestRecord:
    return RequestRecord(f"r-{i}", "p", i, 8, 4, i * 1000, sent_ns=i * 1000 + 1, end_ns=i * 1000 + 9,
                         message=message, status="http_error" if message else "ok")


class Raising:
    def __init__(self) -> None:
        self.seen = 0

    def begin_phase(self, start: PhaseStart) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        self.seen += 1
        if rec.index % 2:
            raise RuntimeError("exporter bug")

    def flush(self) -> None:
        pass

    def end_phase(self) -> None:
        pass


def test_a_raising_watcher_costs_no_record_and_is_said_once(tmp_path: Path) -> None:
    said: list[str] = []
    with RecordWriter(tmp_path) as writer:
        raising = Raising()
        sink = RecordSink(writer, redactor(None), watchers=[("the live exporter", raising)], voice=Heard(warned=said))

        async def go() -> None:
            for i in range(50):
                sink(record(i))
            sink.flush()

        asyncio.run(go())
    assert len(sink.run.records) == 50 and raising.seen == 50
    assert len(list(read_records(tmp_path / "requests.jsonl"))) == 50
    assert len(said) == 1 and "the live exporter failed (RuntimeError: exporter bug)" in said[0]


def test_text_no_file_can_hold_is_replaced_and_counted(tmp_path: Path) -> None:
    with RecordWriter(tmp_path) as writer:
        writer.write(record(0, "bad \ud800 char"))
        writer.write(record(1))
    (first, second) = read_records(tmp_path / "requests.jsonl")
    assert first.message == "bad ? char" and second.status == "ok" and writer.replaced == 1
    assert (tmp_path / "requests.csv").read_text().count("\n") == 3  # the header and both records


def test_a_folder_deleted_under_the_writer_is_noticed_at_the_next_flush(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    failures: list[str] = []
    writer = RecordWriter(run_dir, on_failure=failures.append)
    writer.write(record(0))
    writer.flush()
    shutil.rmtree(run_dir)
    writer.write(record(1))
    writer.flush()  # the write "succeeded" into an unlinked file: the folder's absence is what tells
    writer.write(record(2))
    writer.close()
    assert failures == [f"cannot write records to {run_dir}: the run directory was deleted"]
    assert [r.index for r in writer.unwritten] == [1, 2]  # record 0 reached the disk before the folder went
    folder = rescue([record(i) for i in range(3)], run_dir, "name: x\n")
    assert folder is not None and len(list(read_records(folder / "requests.jsonl"))) == 3
    assert (folder / "scenario.yaml").read_text() == "name: x\n"
    shutil.rmtree(folder)


def test_a_full_disk_is_one_failure_and_every_record_after_it_is_kept(tmp_path: Path) -> None:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("no /dev/full (not Linux)")
    failures: list[str] = []
    writer = RecordWriter(tmp_path, on_failure=failures.append)
    writer._jsonl.close()
    writer._jsonl = full.open("w", encoding="utf-8")  # every flush of it fails with ENOSPC, as a full disk does
    for i in range(5):
        writer.write(record(i))
    writer.flush()
    for i in range(5, 8):
        writer.write(record(i))
    writer.close()
    assert len(failures) == 1 and "No space left on device" in failures[0]
    assert [r.index for r in writer.unwritten] == list(range(8))
    assert json.loads(json.dumps(failures))  # one line, no record in it
    assert "r-3" not in failures[0]


def _claim(args: tuple[str, int]) -> list[str]:
    from harness.run.run_dir import new_run_dir

    reports, n = args
    return [str(new_run_dir(Path(reports), "same")) for _ in range(n)]


def test_runs_started_in_the_same_second_by_several_processes_get_a_folder_each(tmp_path: Path) -> None:
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(4) as pool:
        claimed = [d for part in pool.map(_claim, [(str(tmp_path), 6)] * 4) for d in part]
    assert len(claimed) == 24 and len(set(claimed)) == 24  # each its own, none shared
    assert all(Path(d).is_dir() and not any(Path(d).iterdir()) for d in claimed)


def test_a_file_that_is_not_ours_is_named_so_and_a_torn_last_line_is_only_skipped(tmp_path: Path) -> None:
    from harness.errors import UsageError

    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"event": "login", "user": 7}\n')
    with pytest.raises(UsageError, match=r"foreign.jsonl:1: not a request record"):
        list(read_records(foreign))
    torn = tmp_path / "torn.jsonl"
    with RecordWriter(tmp_path) as writer:
        writer.write(record(0))
    torn.write_text((tmp_path / "requests.jsonl").read_text() + '{"request_id": "r-1", "pha')
    said: list[str] = []
    assert [r.index for r in read_records(torn, Heard(warned=said))] == [0] and "torn last line" in said[0]


def test_a_closed_records_token_times_are_compact_and_read_as_before(tmp_path: Path) -> None:
    """Token times take 8 bytes each once a record is closed (a list of ints takes ~36): equal to the list they
    were, written to disk and read back as the same record."""
    import sys

    from harness.records import Stamps, compact

    times = list(range(10**12, 10**12 + 128 * 1000, 1000))
    rec = record(0)
    rec.chunk_ns, rec.chunk_tokens = list(times), [1] * 128
    listed = sys.getsizeof(rec.chunk_ns) + sum(sys.getsizeof(t) for t in rec.chunk_ns)
    compact(rec)
    assert isinstance(rec.chunk_ns, Stamps) and rec.chunk_ns == times and rec.chunk_tokens == [1] * 128
    assert sys.getsizeof(rec.chunk_ns) * 3 < listed
    with RecordWriter(tmp_path) as writer:
        writer.write(rec)
    (back,) = read_records(tmp_path / "requests.jsonl")
    assert back.chunk_ns == times and back.chunk_tokens == [1] * 128 and back.chunk_ns == rec.chunk_ns
