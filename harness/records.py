"""One record per request, appended to disk the moment the request ends.

A crash or Ctrl-C loses nothing already taken. `requests.jsonl` keeps every field including
the arrival time of each token-bearing chunk; `requests.csv` has the scalar columns.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import IO, Literal, cast

import orjson

Status = Literal["ok", "truncated", "overrun", "http_error", "timeout", "transport_error", "bad_stream", "cancelled"]
STATUSES: tuple[Status, ...] = (
    "ok", "truncated", "overrun", "http_error", "timeout", "transport_error", "bad_stream", "cancelled",
)


class Stamps(array):  # type: ignore[type-arg]
    """Token times, or tokens per chunk, kept compactly once a record is closed: 8 bytes each, where a list of
    ints takes ~36 (the bulk of a record kept for the report: issue 30's memory per request). Equal to a list
    of the same values, as the records read back from disk are."""

    __slots__ = ()

    def __new__(cls, values: Iterable[int] = ()) -> Stamps:
        return cast(Stamps, super().__new__(cls, "q", values))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list | tuple):
            return self.tolist() == list(other)
        return bool(super().__eq__(other))

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self.tolist())


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    phase: str
    index: int
    prompt_tokens_requested: int
    max_tokens: int
    intended_ns: int
    sent_ns: int | None = None  # None: never sent (cancelled before sending)
    first_token_ns: int | None = None  # first chunk with answer *or reasoning* text
    first_content_ns: int | None = None  # first chunk with answer text only
    last_token_ns: int | None = None
    end_ns: int = 0
    chunk_ns: list[int] | Stamps = field(default_factory=list)  # arrival of every token-bearing chunk
    chunk_tokens: list[int] | Stamps = field(default_factory=list)  # tokens in each chunk, when the server says
    prompt_tokens: int | None = None  # server usage
    completion_tokens: int | None = None  # server usage
    reasoning_tokens: int | None = None  # of them, a reasoning model's thinking: usage's count, else its chunks
    batch: int | None = None  # fixed-batch phases: which batch
    status: Status = "ok"
    reason: str = ""
    http_status: int | None = None
    retries: int = 0  # sent again after a pooled connection died before any answer
    held_ns: int = 0  # of its schedule lag, the time an in-flight cap held it back by design (max_in_flight)
    connect_ms: float | None = None  # opening a new connection for it took this long (None: a pooled one)
    content_type: str | None = None  # the answer's Content-Type, kept only when it was not text/event-stream
    cached_tokens: int | None = None  # prompt tokens the server served from its cache, when it says
    server_prompt_ms: float | None = None  # the server's own time on the prompt, when it says (llama.cpp)
    server_decode_ms: float | None = None  # … and on the answer's tokens
    finish_reason: str | None = None  # the server's, from the last choice that gave one
    message: str = ""  # the server's own error message (redacted of the API key, capped)
    session: str | None = None  # multi-turn sessions: the conversation and the turn (0 first)
    turn: int | None = None
    inputs: int = 1  # texts the request carried (an embeddings batch packed into one request)
    images: int = 0  # images sent with its prompt (workload.images) …
    image_bytes: int = 0  # … and their encoded size (PNG or JPEG, before base64)

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens when given, else the count of token-bearing chunks."""
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_ns)

    @property
    def answered_whole(self) -> bool:
        """An ok answer that came whole, not streamed (embeddings, `endpoint.stream: false`): no token
        time."""
        return self.status == "ok" and self.first_token_ns is None and not self.chunk_ns

    @property
    def prompt_taken_ns(self) -> int | None:
        """When the server had taken the prompt: its first token; for an answer that came whole, its end."""
        return self.end_ns if self.answered_whole else self.first_token_ns

    @property
    def exact_chunk_tokens(self) -> bool:
        """The server said how many tokens each chunk carried (continuous usage)."""
        return bool(self.chunk_tokens) and len(self.chunk_tokens) == len(self.chunk_ns)

    @property
    def delivered_tokens(self) -> int:
        """Tokens that actually arrived: per chunk when the server said, else one per token-bearing chunk.
        What throughput counts: a usage total that claims more than the stream carried does not inflate it. An
        answer that came whole delivered what its usage says."""
        if self.answered_whole:
            return self.completion_tokens or 0
        return sum(self.chunk_tokens) if self.exact_chunk_tokens else len(self.chunk_ns)

    @property
    def tokens_estimated(self) -> bool:
        return self.completion_tokens is None

    @property
    def token_mismatch(self) -> bool:
        """The server's count disagrees with the chunks seen (one chunk may carry several tokens)."""
        return (self.completion_tokens is not None and self.completion_tokens != len(self.chunk_ns)
                and not self.answered_whole)


_FIELDS = [f.name for f in fields(RequestRecord)]
_SCALAR_COLUMNS = [name for name in _FIELDS if name not in ("chunk_ns", "chunk_tokens")]
CSV_COLUMNS = [*_SCALAR_COLUMNS, "num_chunks", "output_tokens", "tokens_estimated"]


_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "text"), "int": ((int,), "an integer"), "float": ((int, float), "a number"),
    "None": ((type(None),), "null"), "Status": ((str,), "a status"), "list[int]": ((list,), "a list of integers"),
    "Stamps": ((list,), "a list of integers")}
_PARTS = {f.name: str(f.type).split(" | ") for f in fields(RequestRecord)}
_SPEC = {name: tuple(kind for part in parts for kind in _KINDS[part][0]) for name, parts in _PARTS.items()}
_SAID = {name: " or ".join(dict.fromkeys(_KINDS[part][1] for part in parts)) for name, parts in _PARTS.items()}
_REQUIRED = {f.name for f in fields(RequestRecord) if f.default is MISSING and f.default_factory is MISSING}
_INT64 = 1 << 63


def record_from(data: object) -> RequestRecord:
    """A record from one line's JSON, its fields checked as the statistics will use them: ValueError naming
    the field otherwise (a text where a time goes raised TypeError deep in the statistics; a 1e29 time
    overflowed)."""
    if not isinstance(data, dict):
        raise ValueError(f"a {type(data).__name__}, not an object")
    if missing := _REQUIRED - data.keys():
        raise ValueError(f"no {sorted(missing)[0]}")
    for name, value in data.items():
        kinds = _SPEC.get(name)
        if kinds is None:
            raise ValueError(f"unknown field {repr(name)[:40]}")
        if not isinstance(value, kinds) or isinstance(value, bool) or not _fits(value):
            raise ValueError(f"{name}: {repr(value)[:40]} is not {_SAID[name]}"
                             f"{' in range' if isinstance(value, kinds) and not isinstance(value, bool) else ''}")
        if name == "status" and value not in STATUSES:
            raise ValueError(f"status: {repr(value)[:40]} is not one of {', '.join(STATUSES)}")
    return RequestRecord(**data)


def _fits(value: object) -> bool:
    if isinstance(value, int):
        return -_INT64 <= value < _INT64
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        try:  # array's C loop does the check at a tenth of a Python one's cost
            array("q", value)
        except (TypeError, OverflowError):
            return False
    return True


def record_fields(rec: RequestRecord) -> dict[str, object]:
    """Every field of a record, as `requests.jsonl` holds it (`RequestRecord(**fields)` gives it back)."""
    out = {name: getattr(rec, name) for name in _FIELDS}
    for name in ("chunk_ns", "chunk_tokens"):
        if isinstance(out[name], Stamps):
            out[name] = out[name].tolist()
    return out


def compact(rec: RequestRecord) -> None:
    """A closed record's per-token lists as `Stamps`: a quarter of the memory, for the rest of the run."""
    if rec.chunk_ns and not isinstance(rec.chunk_ns, Stamps):
        rec.chunk_ns = Stamps(rec.chunk_ns)
    if rec.chunk_tokens and not isinstance(rec.chunk_tokens, Stamps):
        rec.chunk_tokens = Stamps(rec.chunk_tokens)


def _csv_row(rec: RequestRecord) -> list[object]:
    values = [getattr(rec, name) for name in _SCALAR_COLUMNS]
    return [*values, len(rec.chunk_ns), rec.output_tokens, rec.tokens_estimated]


def cut_torn_line(path: Path, reach: int = 1 << 20) -> None:
    """`path` truncated after its last newline, where a write failed part-way through a line (a full disk, a
    file-size limit: requests.jsonl ended in a torn line at exactly 262,144 bytes); nothing if it cannot
    be."""
    with contextlib.suppress(OSError), path.open("rb+") as fh:
        end = fh.seek(0, os.SEEK_END)
        start = max(0, end - reach)
        fh.seek(start)
        tail = fh.read()
        if tail.endswith(b"\n") or not tail:
            return
        cut = tail.rfind(b"\n")
        fh.truncate(start + cut + 1 if cut >= 0 else start)


class RecordWriter:
    """Appends finished records to `requests.jsonl` and `requests.csv`; `flush` hands them to the OS.

    It never raises for a record. Text a file cannot hold (a lone surrogate a server's JSON escaped) is
    replaced and counted (`replaced`). A write that fails — a full disk, the directory deleted under the run —
    is noted once (`failure`, and `on_failure` is called), and from then on every record not known to be on
    disk is kept in `unwritten` for the caller to save elsewhere.
    """

    def __init__(self, run_dir: Path, on_failure: Callable[[str], None] | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.jsonl_path = run_dir / "requests.jsonl"
        self.csv_path = run_dir / "requests.csv"
        self._jsonl: IO[str] = self.jsonl_path.open("a", encoding="utf-8")
        self._csv_file: IO[str] = self.csv_path.open("a", encoding="utf-8", newline="")
        self._csv = csv.writer(self._csv_file)
        if self._csv_file.tell() == 0:
            self._csv.writerow(CSV_COLUMNS)
        self.on_failure = on_failure
        self.failure: str | None = None
        self.unwritten: list[RequestRecord] = []
        self.replaced = 0
        self._since_flush: list[RequestRecord] = []

    # A RecordObserver (harness.run.observe): it writes every record, whatever phase it is of.
    def begin_phase(self, start: object) -> None:
        pass

    def record(self, rec: RequestRecord) -> None:
        self.write(rec)

    def end_phase(self) -> None:
        pass

    def write(self, rec: RequestRecord) -> None:
        if self.failure is not None:
            self.unwritten.append(rec)
            return
        try:
            line = orjson.dumps(record_fields(rec))
        except (orjson.JSONEncodeError, TypeError):  # a lone surrogate, an integer past 64 bits
            self.replaced += 1
            line = json.dumps(record_fields(writable(rec))).encode()  # the stdlib's JSON takes any int
        try:
            self._jsonl.write(line.decode() + "\n")
            self._csv.writerow(_csv_row(rec))
        except (OSError, ValueError) as exc:  # ValueError: a file closed under us
            self._fail(exc, rec)
            return
        self._since_flush.append(rec)

    def flush(self) -> None:
        if self.failure is not None:
            return
        try:
            self._jsonl.flush()
            self._csv_file.flush()
            if not self.run_dir.is_dir():  # deleted under the run: writes still "succeed" into an unlinked file
                raise FileNotFoundError(2, "the run directory was deleted", str(self.run_dir))
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return
        self._since_flush = []

    def _fail(self, exc: Exception, rec: RequestRecord | None = None) -> None:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.failure = f"cannot write records to {self.run_dir}: {reason}"
        self.unwritten = [*self._since_flush, *([rec] if rec is not None else [])]
        self._since_flush = []
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def read_back(self) -> Iterator[RequestRecord]:
        """The records this writer put on disk, from its own open file (a deleted folder's too): for a rescue.
        Ones also in `unwritten` (a failed flush may have left part of them) and a torn line are skipped."""
        pending = {rec.request_id for rec in self.unwritten}
        try:  # Linux reopens the file behind a descriptor, deleted or not; elsewhere, its path
            fh = open(f"/proc/self/fd/{self._jsonl.fileno()}", "rb")  # noqa: SIM115
        except (OSError, ValueError):
            try:
                fh = self.jsonl_path.open("rb")
            except OSError:
                return
        with fh:
            for line in fh:
                with contextlib.suppress(orjson.JSONDecodeError, ValueError):
                    rec = record_from(orjson.loads(line))
                    if rec.request_id not in pending:
                        yield rec

    def close(self) -> None:
        self.flush()
        for f in (self._jsonl, self._csv_file):
            with contextlib.suppress(OSError, ValueError):
                f.close()
        if self.failure is not None:  # a write the disk or a file-size limit cut mid-line: back to the last whole
            for path in (self.jsonl_path, self.csv_path):
                cut_torn_line(path)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def writable(rec: RequestRecord) -> RequestRecord:
    """The record with text no file can hold (lone surrogates) replaced, in place; returned for chaining."""
    for name in ("request_id", "phase", "reason", "message", "finish_reason", "session"):
        value = getattr(rec, name)
        if isinstance(value, str):
            setattr(rec, name, value.encode("utf-8", "replace").decode("utf-8"))
    return rec


def write_parquet(path: Path, records: Iterable[RequestRecord]) -> None:
    """All records as one Parquet table: the CSV's columns plus per-chunk arrival times as a list column."""
    import pandas as pd  # reports only: the hot path never imports pandas

    records = list(records)
    frame = pd.DataFrame([_csv_row(rec) for rec in records], columns=CSV_COLUMNS)
    frame["chunk_ns"] = [list(rec.chunk_ns) for rec in records]
    frame.to_parquet(path, index=False)
