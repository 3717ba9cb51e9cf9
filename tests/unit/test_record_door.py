"""The record's door: a `requests.jsonl` line is a record with every field of the kind the statistics use, or
one line naming the field (a text where a time goes was a TypeError deep in the statistics, a 1e29 time an
overflow), and a records file that is not one is refused at its line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from harness.errors import UsageError
from harness.records import RecordWriter, RequestRecord, record_fields, record_from
from harness.records_read import read_run_records, record_files

GOOD = record_fields(RequestRecord("r1", "p", 0, 8, 4, 10, sent_ns=11, first_token_ns=20, chunk_ns=[20, 30],
                                   connect_ms=1.5, status="ok"))


def test_a_record_written_reads_back_as_itself() -> None:
    assert record_fields(record_from(orjson.loads(orjson.dumps(GOOD)))) == GOOD


@pytest.mark.parametrize(("change", "says"), [
    ({"chunk_ns": "abc"}, "chunk_ns: 'abc' is not a list of integers$"),
    ({"chunk_ns": [1, "2"]}, "chunk_ns: .1, '2'. is not a list of integers in range"),
    ({"chunk_ns": [1, 2**70]}, "chunk_ns: .1, 1180591620717411303424. is not a list of integers in range"),
    ({"intended_ns": 1.2e29}, "intended_ns: 1.2e+29 is not an integer$"),
    ({"intended_ns": 2**63}, "intended_ns: 9223372036854775808 is not an integer in range"),
    ({"index": True}, "index: True is not an integer$"),
    ({"status": "fine"}, "status: 'fine' is not one of ok, truncated"),
    ({"connect_ms": "1"}, "connect_ms: '1' is not a number or null$"),
    ({"zzz": 1}, "unknown field 'zzz'"),
    ({"request_id": None}, "request_id: None is not text$"),
])
def test_a_field_of_the_wrong_kind_is_named(change: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=f"^{says.replace('(', '.').replace('+', '.')}"):
        record_from({**GOOD, **change})


def test_a_line_that_is_not_an_object_or_lacks_a_field_is_named() -> None:
    with pytest.raises(ValueError, match="a list, not an object"):
        record_from([1])
    with pytest.raises(ValueError, match="no intended_ns"):
        record_from({k: v for k, v in GOOD.items() if k != "intended_ns"})


def test_a_records_file_with_a_bad_field_is_refused_at_its_line(tmp_path: Path) -> None:
    from harness.records_read import read_records

    path = tmp_path / "requests.jsonl"
    path.write_bytes(orjson.dumps(GOOD) + b"\n" + orjson.dumps({**GOOD, "end_ns": "soon"}) + b"\n"
                     + orjson.dumps(GOOD) + b"\n")
    with pytest.raises(UsageError, match=r"requests\.jsonl:2: not a request record \(end_ns: 'soon' is not an"):
        list(read_records(path))


def test_a_run_folder_is_read_with_its_parts_in_order_and_they_stop_at_the_first_gap(tmp_path: Path) -> None:
    for part, folder in enumerate([tmp_path, tmp_path / "part-2", tmp_path / "part-3", tmp_path / "part-5"]):
        with RecordWriter(folder) as writer:
            writer.write(RequestRecord(f"r{part}", "p", part, 8, 4, part))
    assert [p.parent for p in record_files(tmp_path)] == [tmp_path, tmp_path / "part-2", tmp_path / "part-3"]
    assert [r.request_id for r in read_run_records(tmp_path)] == ["r0", "r1", "r2"]
