"""Each guard of issue 64, mutation-checked: its hostile case is held with the guard in place, and gets through with
the guard taken out (monkeypatched away) — so the guard, not luck or a neighbour, is what holds it, and removing
it would fail the tests. Guards written inline (a comparison inside a function) are held by their regression
tests instead, each of which failed on the code before its fix (docs/failures.md)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from harness import doors, records_read
from harness.client import sse
from harness.config import load, request_shape
from harness.config.scenario import parse_scenario
from harness.errors import BadChunk, FigureError, ScenarioError, TraceError, UsageError
from harness.report import files
from harness.tools import history
from harness.workload import traces


def _refused(call: Callable[[], object], kind: type[BaseException] | tuple[type[BaseException], ...]) -> bool:
    """Whether `call` refuses in its documented error (anything else — a value, another exception — is not)."""
    try:
        call()
    except kind:
        return True
    except Exception:
        return False
    return False


def _nan_body() -> bool:
    return _refused(lambda: doors.json_value('{"temperature": NaN}'), ValueError)


def _deep() -> bool:
    return _refused(lambda: doors.json_value("[" * 60_000 + "]" * 60_000), ValueError)


def _huge_float() -> bool:
    return _refused(lambda: doors.json_value('{"t": 1e999}'), ValueError)


def _long_int() -> bool:
    return _refused(lambda: doors.json_value("9" * 4000), ValueError)


def _surrogate() -> bool:
    try:
        orjson.dumps(doors.json_value('{"prompt": "a\\ud800b"}'))
    except TypeError:  # the request encoder's "surrogates not allowed": the send path throws, no record taken
        return False
    return True


def _record_kinds(tmp: Path) -> bool:
    path = tmp / "requests.jsonl"
    path.write_text(json.dumps({"request_id": "r", "phase": "p", "index": 0, "prompt_tokens_requested": 8,
                                "max_tokens": 4, "intended_ns": 0, "chunk_ns": "abc"}) + "\n" + "{}\n")
    return _refused(lambda: list(records_read.read_records(path)), UsageError)


def _long_trace_line(tmp: Path) -> bool:
    path = tmp / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1}\n' + "x" * (3 << 20) + "\n")
    try:
        traces.read_trace(path, "mooncake")
    except TraceError as exc:
        return "a line over 1 MiB" in str(exc)  # unbounded, the whole line was read and parsed as JSON
    return False


def _history_bomb() -> bool:
    blob = zlib.compress(b"\0" * (history.HISTORY_CELL_BYTES + 8))
    return _refused(lambda: history._unpack(blob), history._BadCell)


def _nan_summary(tmp: Path) -> bool:
    fake = SimpleNamespace(to_json=lambda: {"phases": [{"throughput": {"tokens_per_s": float("nan")}}]})
    return _refused(lambda: files.write_reports(fake, tmp, [], []), FigureError)  # type: ignore[arg-type]


def _far_span() -> bool:
    data = {"name": "s", "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1e-300, "requests": 2}}]}
    return _refused(lambda: parse_scenario(data, "m.yaml"), ScenarioError)


def _token_echo() -> bool:
    try:
        request_shape.resolve({"X-Key": "env:hf_abcdefghijklmnopqrstuvwxyz012345"}, {}, "--header")
    except ValueError as exc:
        return "abcdefghijklmnopqrstuvwxyz012345" not in str(exc)
    return False


def _header_break() -> bool:
    return _refused(lambda: request_shape.parse_header("X-Org: acme\r\nX-Evil: 1"), ValueError)


def _long_sse_line() -> bool:
    reader = sse.ChunkReader()
    return _refused(lambda: [reader.read(b"data: " + b"x" * (1 << 20)) for _ in range(9)], BadChunk)


@dataclass(frozen=True)
class Guard:
    name: str
    held: Callable[[Path], bool]  # the hostile case handled as it should be
    remove: Callable[[pytest.MonkeyPatch], None]  # the guard taken out


def _no_limit(module: object, name: str) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda mp: mp.setattr(module, name, float("inf") if name.endswith("_S") else 1 << 62)


GUARDS = [
    Guard("JSON: NaN is not a number", lambda _: _nan_body(), lambda mp: mp.setattr(doors, "_no_constant", float)),
    Guard("JSON: nesting depth", lambda _: _deep(), _no_limit(doors, "JSON_DEPTH")),
    Guard("JSON: a float past the largest", lambda _: _huge_float(), lambda mp: mp.setattr(doors, "_finite", float)),
    Guard("JSON: integer digits", lambda _: _long_int(), _no_limit(doors, "JSON_INT_DIGITS")),
    Guard("text: lone surrogates replaced", lambda _: _surrogate(), lambda mp: mp.setattr(doors, "valid_text", str)),
    Guard("records: each field's kind", _record_kinds,
          lambda mp: mp.setattr(records_read, "record_from", lambda d: records_read.RequestRecord(**d))),
    Guard("traces: a line's length", _long_trace_line,
          lambda mp: mp.setattr(traces, "bounded_lines", lambda fh, limit: iter(fh))),
    Guard("history: a cell's inflated size", lambda _: _history_bomb(),
          lambda mp: mp.setattr(history, "HISTORY_CELL_BYTES", 0)),  # zlib's 0: no bound
    Guard("summary: no figure that is not a number", _nan_summary,
          lambda mp: mp.setattr(files, "non_finite", lambda value, where="": None)),
    Guard("scenario: a month's span at most", lambda _: _far_span(), _no_limit(load, "SPAN_S")),
    Guard("secrets: a token-like variable name hidden", lambda _: _token_echo(),
          lambda mp: mp.setattr(request_shape, "variable_shown", str)),
    Guard("headers: no line break in a value", lambda _: _header_break(),
          lambda mp: mp.setattr(request_shape, "check_header", lambda name, value: None)),
    Guard("SSE: a line's length", lambda _: _long_sse_line(), _no_limit(sse, "SSE_LINE_BYTES")),
]


@pytest.mark.parametrize("guard", GUARDS, ids=[g.name for g in GUARDS])
def test_the_guard_is_what_holds_its_case(guard: Guard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert guard.held(tmp_path), "the case is not held even with its guard"
    guard.remove(monkeypatch)
    assert not guard.held(tmp_path), "the case is held without its guard: the guard is not what holds it"
