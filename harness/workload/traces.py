"""Request traces: readers for the public formats, one common row, and replay transformations.

Every reader yields `TraceRow`s (arrival offset from the first request, input and output tokens,
optional prefix-block ids and session). A bad row is an error naming the file and line, or, with
`skip_bad`, skipped and counted. Replay transformations (`window`, `rescale`) are pure.

Formats:
- Azure LLM inference 2023/2024 CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`, timestamps with 7
  fractional digits (which Python's `%f` rejects), CRLF line ends, no newline after the last row.
- Mooncake JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (512-token prefix blocks).
- BurstGPT CSV: `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`; rows with 0
  response tokens are failed requests: skipped and counted.
- Generic CSV or JSONL with a column mapping (time column in seconds or milliseconds).
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from harness.doors import OVERLONG, bounded_lines, json_value
from harness.errors import TraceError
from harness.limits import SPAN_S, TRACE_LINE_CHARS
from harness.redact import printable

Format = Literal["azure", "mooncake", "burstgpt", "generic"]
MOONCAKE_BLOCK_TOKENS = 512



@dataclass(frozen=True, slots=True)
class TraceRow:
    arrival_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] | None = None
    session: str | None = None


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Which columns of a generic CSV/JSONL hold what."""

    time: str = "timestamp"
    input: str = "input_tokens"
    output: str = "output_tokens"
    time_unit: Literal["s", "ms"] = "s"
    session: str | None = None


@dataclass(slots=True)
class Trace:
    source: str
    rows: list[TraceRow]
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def arrivals_s(self) -> np.ndarray:
        return np.array([r.arrival_s for r in self.rows], dtype=np.float64)

    def stats(self) -> dict[str, Any]:
        t = self.arrivals_s
        gaps = np.diff(t)
        span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
        inp = np.array([r.input_tokens for r in self.rows])
        out = np.array([r.output_tokens for r in self.rows])

        def pct(a: np.ndarray) -> dict[str, float]:
            return {f"p{q:g}": float(np.percentile(a, q)) for q in (50, 90, 99)} | {"mean": float(a.mean())}

        return {
            "rows": len(self.rows), "span_s": span,
            "mean_rate": (len(t) - 1) / span if span > 0 else None,
            "interarrival_cv": float(gaps.std() / gaps.mean()) if len(gaps) and gaps.mean() > 0 else None,
            "distinct_arrivals": len(np.unique(t)),
            "input_tokens": pct(inp), "output_tokens": pct(out), "skipped": dict(self.skipped),
        }


def _bad(path: Path, line: int, message: str, skip: bool, skipped: dict[str, int]) -> None:
    if not skip:
        raise TraceError(f"{path}:{line}: {printable(message, one_line=True)}")  # it may quote the row
    skipped["bad_rows"] = skipped.get("bad_rows", 0) + 1


def _azure_time(text: str) -> float:
    """Seconds since the epoch of `2023-11-16 18:15:46.6805900` (any number of fractional digits)."""
    whole, _, frac = text.strip().partition(".")
    base = dt.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC).timestamp()
    return base + (float("0." + frac) if frac else 0.0)


def open_text(path: Path) -> IO[str]:
    """A trace file as text; `.gz` files are decompressed on the fly (the shipped traces are gzipped). Bytes
    that are not UTF-8 read as U+FFFD, so the row holding them is a bad row (they were a UnicodeDecodeError
    traceback)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8", errors="replace")
    return path.open(newline="", encoding="utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A line no row could come from: past TRACE_LINE_CHARS, or one the CSV reader refused."""

    why: str


_TOO_LONG = Unreadable(f"a line over {TRACE_LINE_CHARS >> 20} MiB")


def inner_suffix(path: Path) -> str:
    """`.jsonl` for both `x.jsonl` and `x.jsonl.gz`."""
    return Path(path.stem).suffix if path.suffix == ".gz" else path.suffix


def _csv_rows(path: Path) -> Iterator[tuple[int, dict[str, str] | Unreadable]]:
    with open_text(path) as fh:
        reader = csv.DictReader(bounded_lines(fh, TRACE_LINE_CHARS))
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:  # a field past the csv module's own limit, an unclosed quote: a bad row
                yield reader.line_num, Unreadable(f"not CSV ({exc})")
                continue
            yield reader.line_num, _TOO_LONG if OVERLONG.strip() in row.values() else row


def _finish(path: Path, raw: list[tuple[float, TraceRow]], skipped: dict[str, int]) -> Trace:
    if not raw:
        raise TraceError(f"{path}: no usable rows")
    raw.sort(key=lambda pair: pair[0])  # stable: equal timestamps keep file order
    t0 = raw[0][0]
    if raw[-1][0] - t0 > SPAN_S:
        raise TraceError(f"{path}: its timestamps span {raw[-1][0] - t0:.3g} s (the first {t0:.6g}, the last "
                         f"{raw[-1][0]:.6g}), over the {SPAN_S // 86_400} days a phase may span: a row's "
                         "timestamp in another unit?")
    return Trace(str(path), [replace(row, arrival_s=t - t0) for t, row in raw], skipped)


Parsed = tuple[float, TraceRow] | None  # None: a row deliberately left out (counted by the parser)
Rows = Iterator[tuple[int, Any]]


def _read(path: Path, rows: Rows, parse: Any, what: str, skip_bad: bool,
          skipped: dict[str, int] | None = None) -> Trace:
    """Rows through `parse` (row, skipped) -> Parsed; a row it cannot parse is a bad row of the file."""
    skipped = {} if skipped is None else skipped
    raw: list[tuple[float, TraceRow]] = []
    for line, row in rows:
        if isinstance(row, Unreadable):
            _bad(path, line, row.why, skip_bad, skipped)
            continue
        try:
            item = parse(row, skipped)
            if item is not None:
                _check(*item)
        except (KeyError, ValueError, TypeError, AttributeError, OverflowError) as exc:  # int(1e999): Overflow
            _bad(path, line, f"{what} ({exc})", skip_bad, skipped)
            continue
        if item is not None:
            raw.append(item)
    return _finish(path, raw, skipped)


def _check(arrival_s: float, row: TraceRow) -> None:
    if not math.isfinite(arrival_s):
        raise ValueError(f"timestamp {arrival_s} is not a number")
    if row.input_tokens < 0 or row.output_tokens < 0:
        raise ValueError(f"negative token count ({row.input_tokens} in, {row.output_tokens} out)")


def _json_lines(path: Path, skip_bad: bool, skipped: dict[str, int]) -> Rows:
    with open_text(path) as fh:
        for line, text in enumerate(bounded_lines(fh, TRACE_LINE_CHARS), 1):
            if text is OVERLONG:
                _bad(path, line, _TOO_LONG.why, skip_bad, skipped)
                continue
            if not text.strip():
                continue
            try:
                obj = json_value(text)  # the door: a line nested 100,000 deep was a RecursionError traceback
            except ValueError as exc:
                _bad(path, line, f"invalid JSON ({exc})", skip_bad, skipped)
                continue
            if isinstance(obj, dict):
                yield line, obj
            else:
                _bad(path, line, "not a JSON object", skip_bad, skipped)


def read_azure(path: Path, skip_bad: bool = False) -> Trace:
    def parse(row: dict[str, str], _: dict[str, int]) -> Parsed:
        return _azure_time(row["TIMESTAMP"]), TraceRow(0.0, int(row["ContextTokens"]), int(row["GeneratedTokens"]))

    return _read(path, _csv_rows(path), parse, "not an Azure trace row", skip_bad)


def read_mooncake(path: Path, skip_bad: bool = False) -> Trace:
    def parse(obj: dict[str, Any], _: dict[str, int]) -> Parsed:
        ids = obj.get("hash_ids")
        return obj["timestamp"] / 1e3, TraceRow(0.0, int(obj["input_length"]), int(obj["output_length"]),
                                                tuple(int(i) for i in ids) if ids is not None else None)

    skipped: dict[str, int] = {}
    return _read(path, _json_lines(path, skip_bad, skipped), parse, "not a Mooncake trace row", skip_bad, skipped)


def read_burstgpt(path: Path, model: str | None = None, skip_bad: bool = False) -> Trace:
    def parse(row: dict[str, str], skipped: dict[str, int]) -> Parsed:
        if model is not None and row["Model"] != model:
            return None
        response = int(float(row["Response tokens"]))
        if response == 0:  # a failed request: no answer to replay
            skipped["failed_requests"] = skipped.get("failed_requests", 0) + 1
            return None
        return float(row["Timestamp"]), TraceRow(0.0, int(float(row["Request tokens"])), response)

    return _read(path, _csv_rows(path), parse, "not a BurstGPT row", skip_bad)


def read_generic(path: Path, columns: ColumnMap, skip_bad: bool = False) -> Trace:
    scale = 1e-3 if columns.time_unit == "ms" else 1.0

    def parse(row: dict[str, Any], _: dict[str, int]) -> Parsed:
        session = str(row[columns.session]) if columns.session else None
        ids = row.get("hash_ids")  # JSONL from `trace convert` of a Mooncake trace keeps its prefix blocks
        return float(row[columns.time]) * scale, TraceRow(0.0, int(row[columns.input]), int(row[columns.output]),
                                                          tuple(int(i) for i in ids) if ids else None, session)

    skipped: dict[str, int] = {}
    json_rows = inner_suffix(path) in (".jsonl", ".json")
    rows = _json_lines(path, skip_bad, skipped) if json_rows else _csv_rows(path)
    return _read(path, rows, parse, "missing or bad column", skip_bad, skipped)


def sniff(path: Path) -> Format:
    """The format of a trace file, from its first line."""
    try:
        with open_text(path) as fh:
            first = fh.readline(TRACE_LINE_CHARS)
    except (OSError, EOFError) as exc:
        if isinstance(exc, EOFError) or not exc.strerror:
            raise TraceError(f"{path}: not a readable gzip file ({exc})") from None
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    if first.startswith("TIMESTAMP,ContextTokens,GeneratedTokens"):
        return "azure"
    if first.startswith("Timestamp,Model,Request tokens"):
        return "burstgpt"
    if first.lstrip().startswith("{") and '"input_length"' in first:
        return "mooncake"
    return "generic"


def read_trace(path: Path, fmt: Format | None = None, *, skip_bad: bool = False, model: str | None = None,
               columns: ColumnMap | None = None) -> Trace:
    try:
        fmt = fmt or sniff(path)
        if fmt == "azure":
            return read_azure(path, skip_bad)
        if fmt == "mooncake":
            return read_mooncake(path, skip_bad)
        if fmt == "burstgpt":
            return read_burstgpt(path, model, skip_bad)
        return read_generic(path, columns or ColumnMap(), skip_bad)
    except (OSError, EOFError) as exc:
        raise TraceError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def window(trace: Trace, start_s: float | None = None, end_s: float | None = None, limit: int | None = None,
           time_scale: float = 1.0) -> Trace:
    """Rows arriving in [start, end) of the trace, at most `limit`, re-based to 0 and sped up
    `time_scale`×."""
    lo = start_s or 0.0
    rows = [r for r in trace.rows if r.arrival_s >= lo and (end_s is None or r.arrival_s < end_s)]
    rows = rows[:limit] if limit is not None else rows
    if not rows:
        raise TraceError(f"{trace.source}: no rows in the window [{lo}, {end_s})")
    t0 = rows[0].arrival_s
    return Trace(trace.source, [replace(r, arrival_s=(r.arrival_s - t0) / time_scale) for r in rows],
                 dict(trace.skipped))


def rescale(trace: Trace, target_rate: float, duration_s: float | None = None) -> Trace:
    """The same arrivals stretched in time to a mean rate of `target_rate`: the burst shape (CV) is kept.

    With `duration_s`, the rate is met over the part that will be replayed, not over the whole window: the
    first `target_rate × duration_s` rows are spread over exactly `duration_s` (a quiet start of a trace
    would otherwise under-deliver)."""
    t = trace.arrivals_s
    count = math.ceil(target_rate * duration_s) if duration_s is not None else None
    if count is not None and count < len(t) and t[count] > 0:
        factor = duration_s / t[count] if duration_s is not None else 1.0
    elif len(t) >= 2 and t[-1] - t[0] > 0:
        factor = ((len(t) - 1) / (t[-1] - t[0])) / target_rate
    else:
        return trace
    return Trace(trace.source, [replace(r, arrival_s=r.arrival_s * factor) for r in trace.rows], dict(trace.skipped))


def cap_idle(trace: Trace, max_idle_s: float) -> tuple[Trace, int, float]:
    """Every gap between arrivals longer than `max_idle_s` shortened to it; also how many and the seconds
    cut."""
    rows, shift, capped = [], 0.0, 0
    previous = trace.rows[0].arrival_s if trace.rows else 0.0
    for r in trace.rows:
        gap = r.arrival_s - previous
        if gap > max_idle_s:
            shift += gap - max_idle_s
            capped += 1
        previous = r.arrival_s
        rows.append(replace(r, arrival_s=r.arrival_s - shift))
    return Trace(trace.source, rows, dict(trace.skipped)), capped, shift
