"""Every reader of outside input, fuzzed (issue 64): whatever bytes reach it — random, or a valid input mutated with
the hostile pieces of this round's cases (NaN, 1e999, brackets hundreds deep, lone surrogates, NULs, YAML
aliases) — it returns a value that holds what its callers assume (finite figures, whole records, URLs on http(s))
or refuses in its documented error, in one line: never another exception, never a traceback. Each runs under an
address-space limit, so an unbounded allocation fails here as a MemoryError instead of passing on a big machine.

`make test` runs each reader on a fixed seed and a short budget; `make fuzz` long and unseeded
(HARNESS_FUZZ_EXAMPLES); the end of the run prints how many inputs each reader took.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli.request_flags import _json_object
from harness.client.backend import error_message, error_reason
from harness.client.sse import ChunkReader
from harness.config.base import web_url
from harness.config.labels import check_labels, parse_label
from harness.config.request_shape import parse_header
from harness.config.scenario import load_scenario
from harness.config.units import duration_seconds
from harness.devices.preset_file import read_presets
from harness.doors import valid_text
from harness.errors import BadChunk, PresetError, ScenarioError, TraceError, UsageError
from harness.limits import SPAN_S
from harness.records import RequestRecord, record_fields
from harness.records_read import read_records
from harness.report.files import non_finite
from harness.run.distributed import wire
from harness.stats.schema import read_summary
from harness.stats.server import parse_exposition, read_server_metrics
from harness.tools import history
from harness.tools.search import parse_slo
from harness.workload.datasets import sharegpt_turns
from harness.workload.traces import read_trace

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "200"))
SEEDED = EXAMPLES <= 1000  # `make test`: the same inputs every run; `make fuzz`: new ones each time
ROOT = Path(__file__).resolve().parents[2]
HEADROOM = 1 << 30  # address space a reader may take beyond what the process holds: far past any bounded read

# Pieces this round's hostile cases were made of, spliced into valid inputs
HOSTILE = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"1e308", b"-1e308", b"1e-300", b"9" * 60, b"-1", b"0",
           b"[" * 300, b"{" * 300, b"\"\\ud800\"", b"\xed\xa0\x80", b"\xff\xfe", b"\x00", b"null", b"true", b'""',
           b"\n", b"\r\n", b"---\n", b"&a [*a, *a, *a]", b"*a", b"!!python/object:os.system", b"\t", b",", b":",
           b'"', b"'", b"\\", b"%", b"\x1b[31m", b"http://u:p@h:99999/", b"HTTP://", b"\r\nX-Evil: 1"]


def _mutate(seed: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    data = bytearray(seed)
    for pos, op, piece in edits:
        at = pos % (len(data) + 1)
        if op == 0:
            data[at:at] = piece
        elif op == 1:
            data[at:at + len(piece)] = piece
        elif op == 2:
            del data[at:at + 1 + pos % 32]
        else:
            data[at:at] = data[at:at + 64] * 3
    return bytes(data)


def inputs(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    edits = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 3), st.sampled_from(HOSTILE)
                               | st.binary(min_size=1, max_size=8)), min_size=1, max_size=5)
    mutated = st.builds(_mutate, st.sampled_from(seeds), edits)
    return st.one_of(mutated, mutated, mutated, st.sampled_from(seeds), st.binary(max_size=200))


def text(data: bytes) -> str:
    """Bytes as a flag reaches Python from argv: undecodable bytes as lone surrogates (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def _file(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


@dataclass(frozen=True)
class Reader:
    """One door: its valid inputs, how it reads bytes, the errors it is documented to refuse with, and what a value
    it returns must hold."""

    name: str
    seeds: Callable[[], list[bytes]]
    read: Callable[[bytes, Path], object]
    refusals: tuple[type[BaseException], ...]
    holds: Callable[[object], None] = lambda value: None
    lines: int = 1  # a refusal's most lines (a scenario lists every problem, one line each)
    shown: bool = True  # its refusal is printed (the scrape's is not: it says "unparsable exposition")


# ---- valid inputs ----------------------------------------------------------------------------------------------

def _scenarios() -> list[bytes]:
    return [(ROOT / "scenarios" / name).read_bytes() for name in ("quickstart.yaml", "sweep.yaml", "vision.yaml")]


PRESETS = [b"accelerators:\n  gpu-x: {tflops: 500, hbm_tbps: 1.675, memory_gb: 80, eta_mem: 0.692}\nmodels:\n"
           b"  tiny: {layers: 32, hidden: 4096, q_heads: 32, kv_heads: 8, head_dim: 128, params_b: 8.03, "
           b"vocab: 128256}\n"]
TWINS = [b"accelerators:\n  t: {kind: fitted, step_ms: 0, weights_ms: 0, per_ktoken_ms: 1, per_seq_ms: 1, "
         b"per_context_ktoken_ms: 0, kv_tokens: 9000, decode_ms: [24, 31.5]}\n"]


def _summaries() -> list[bytes]:
    from harness.config.scenario import parse_scenario
    from harness.tools.predict import predict

    summary = predict(parse_scenario({"name": "f", "workload": {"prompt_tokens": 16, "output_tokens": 4}, "phases": [
        {"name": "p", "load": {"type": "poisson", "rate": 5, "requests": 4}}]}, "fuzz"))
    return [json.dumps(summary.to_json()).encode()]


def _records() -> list[bytes]:
    recs = [RequestRecord(f"r{i}", "p", i, 8, 4, i * 10, sent_ns=i * 10, first_token_ns=i * 10 + 5,
                          last_token_ns=i * 10 + 9, end_ns=i * 10 + 9, chunk_ns=[i * 10 + 5, i * 10 + 9],
                          completion_tokens=2, connect_ms=0.5) for i in range(3)]
    return [b"".join(orjson.dumps(record_fields(r)) + b"\n" for r in recs)]


AZURE = [b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n"
         b"2023-11-16 18:15:50.9951690,396,109\r\n2023-11-16 18:15:51.1020000,879,31"]
GENERIC = [b'{"timestamp": 0.0, "input_tokens": 120, "output_tokens": 40}\n'
           b'{"timestamp": 0.35, "input_tokens": 860, "output_tokens": 210, "hash_ids": [1, 2]}\n',
           b"timestamp,input_tokens,output_tokens\n0,120,40\n0.35,860,210\n"]
MOONCAKE = [b'{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [0, 1, 2]}\n'
            b'{"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [0, 3]}\n']


def _data(name: str) -> Callable[[], list[bytes]]:
    return lambda: [(ROOT / "scenarios" / "data" / name).read_bytes()]


EXPOSITION = [b"# HELP vllm:num_requests_running n\n# TYPE vllm:num_requests_running gauge\n"
              b'vllm:num_requests_running{model_name="m"} 3.0\nvllm:num_requests_waiting{model_name="m"} 1.0\n'
              b'vllm:gpu_cache_usage_perc{model_name="m"} 0.25\nvllm:prompt_tokens_total{model_name="m"} 1234.0\n']


# ---- what a value must hold ------------------------------------------------------------------------------------

def _finite_summary(summary: object) -> None:
    assert non_finite(summary.to_json()) is None  # type: ignore[attr-defined]


def _whole_records(records: object) -> None:
    for rec in records:  # type: ignore[attr-defined]
        assert isinstance(rec.intended_ns, int) and all(isinstance(t, int) for t in rec.chunk_ns)


def _sane_trace(trace: object) -> None:
    for row in trace.rows:  # type: ignore[attr-defined]
        assert math.isfinite(row.arrival_s) and 0 <= row.arrival_s <= SPAN_S
        assert row.input_tokens >= 0 and row.output_tokens >= 0


def _sendable(body: object) -> None:
    orjson.dumps(body)  # valid UTF-8 all through, or the request encoder throws in the send path
    json.dumps(body, allow_nan=False)  # and no NaN sent on as null


def _utf8(turns: object) -> None:
    for turn in turns:  # type: ignore[attr-defined]
        orjson.dumps([list(m) for m in turn.messages])  # what the request encoder will be given


def _encodable(said: object) -> None:
    str(said).encode("utf-8")


def _finite_positive(values: object) -> None:
    numbers = values.values() if isinstance(values, dict) else [values]
    assert all(math.isfinite(v) and v >= 0 for v in numbers)  # type: ignore[arg-type]


def _web(url: object) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(str(url))
    assert parts.scheme in ("http", "https") and parts.hostname and "@" not in parts.netloc
    assert 1 <= (parts.port or 80) <= 65535


def _one_line_header(pair: object) -> None:
    name, value = pair  # type: ignore[misc]
    assert not any(c in name + value for c in "\r\n\0")


def _printable(said: object) -> None:
    assert isinstance(said, str) and "\n" not in said and "\x1b" not in said


def _finite_rows(rows: object) -> None:
    for row in rows:  # type: ignore[attr-defined]
        assert all(math.isfinite(v) for v in row.values.values())


# ---- the readers -----------------------------------------------------------------------------------------------

def _gz(data: bytes, folder: Path) -> object:
    return read_trace(_file(folder, "t.jsonl.gz", gzip.compress(data, 1)), "mooncake")


def _metrics_csv(data: bytes, folder: Path) -> object:
    _file(folder, "server_metrics.csv", data)
    return read_server_metrics(folder)


def _history_blocks(data: bytes, _: Path) -> object:
    import zlib

    try:
        return history._unpack(zlib.compress(data[1:]) if data[:1] == b"Z" else data)  # Z: a cell before zlib
    except history._BadCell as exc:
        raise ScenarioError(str(exc)) from None


def _history_cell(data: bytes, _: Path) -> object:
    try:
        return history._cell(text(data), "figures")
    except history._BadCell as exc:
        raise ScenarioError(str(exc)) from None


def _generic(data: bytes, folder: Path) -> object:
    return read_trace(_file(folder, "t.jsonl" if data[:1] == b"{" else "t.csv", data), "generic")


def _sse(data: bytes, _: Path) -> object:
    reader = ChunkReader()
    return [c for half in (data[:len(data) // 2], data[len(data) // 2:]) for c in reader.read(half)]


READERS = [
    Reader("scenario YAML", _scenarios, lambda d, f: load_scenario(_file(f, "s.yaml", d)), (ScenarioError,),
           lines=11),
    Reader("presets YAML", lambda: PRESETS, lambda d, f: read_presets(_file(f, "p.yaml", d)), (PresetError,)),
    Reader("twin file", lambda: TWINS, lambda d, f: read_presets(_file(f, "twin.yaml", d)), (PresetError,)),
    Reader("--extra-body", lambda: [b'{"temperature": 0.5, "top_p": 0.9, "chat_template_kwargs": {"x": [1]}}'],
           lambda d, f: _json_object(text(d)), (click.BadParameter,), _sendable),
    Reader("summary.json", _summaries, lambda d, f: read_summary(_file(f, "summary.json", d)), (ScenarioError,),
           _finite_summary),
    Reader("requests.jsonl", _records, lambda d, f: list(read_records(_file(f, "requests.jsonl", d))),
           (UsageError,), _whole_records),
    Reader("history blocks", lambda: [b"Z" + bytes(range(64)), __import__("zlib").compress(b"\0" * 64)],
           _history_blocks, (ScenarioError,)),
    Reader("history cell", lambda: [b'{"ttft_p99": 12.5, "phases": ["a"]}'], _history_cell, (ScenarioError,)),
    Reader("Azure trace", lambda: AZURE, lambda d, f: read_trace(_file(f, "t.csv", d), "azure"), (TraceError,),
           _sane_trace),
    Reader("Mooncake trace", lambda: MOONCAKE, lambda d, f: read_trace(_file(f, "t.jsonl", d), "mooncake"),
           (TraceError,), _sane_trace),
    Reader("gzipped trace", lambda: MOONCAKE, _gz, (TraceError,), _sane_trace),
    Reader("BurstGPT trace", _data("burstgpt-sample.csv"),
           lambda d, f: read_trace(_file(f, "t.csv", d), "burstgpt"), (TraceError,), _sane_trace),
    Reader("generic trace", lambda: GENERIC, _generic, (TraceError,), _sane_trace),
    Reader("ShareGPT dataset", _data("sharegpt-sample.json"),
           lambda d, f: sharegpt_turns(str(_file(f, "d.json", d))), (TraceError,), _utf8),
    Reader("duration", lambda: [b"30s", b"500ms", b"1.5h", b"2e3us"], lambda d, f: duration_seconds(text(d)),
           (ValueError,), _finite_positive),
    Reader("--slo", lambda: [b"ttft=500ms,tpot=50ms", b"ttft_answer=2.5s,e2e_p99=10s"],
           lambda d, f: parse_slo(text(d)).model_dump(exclude_none=True), (ValueError,), _finite_positive),
    Reader("URL", lambda: [b"http://127.0.0.1:8000/v1", b"https://staging.example:443/v1", b"localhost:9091"],
           lambda d, f: web_url(text(d)), (ValueError,), _web),
    Reader("--header", lambda: [b"X-Org: acme", b"api-key=env:AZURE_KEY"], lambda d, f: parse_header(text(d)),
           (ValueError,), _one_line_header),
    Reader("--label", lambda: [b"team=infra", b"gpu=h100"],
           lambda d, f: check_labels(dict([parse_label(text(d))])), (ValueError,)),
    Reader("server stream (SSE)", lambda: [b'data: {"choices": [{"delta": {"content": "x"}}]}\n\ndata: [DONE]\n\n'],
           _sse, (BadChunk,)),
    Reader("error body", lambda: [b'{"error": {"message": "too long", "type": "invalid_request_error"}}'],
           lambda d, f: (error_reason(400, d), error_message(d))[1], (), _printable),
    Reader("/metrics", lambda: EXPOSITION, lambda d, f: [type("R", (), {"values": parse_exposition(text(d))})()],
           (ValueError,), _finite_rows, shown=False),
    Reader("server_metrics.csv", lambda: [b"t_ns,running,waiting\n1000,3,1\n2000,4,0\n"], _metrics_csv,
           (ScenarioError,), _finite_rows),
    Reader("relay line", lambda: [b'{"k": "beat", "sent": 3}', b'{"k": "phase", "name": "p", "sent": 1}'],
           lambda d, f: wire.decode(wire.MARK + d), (ValueError,)),
    Reader("text", lambda: ["a\ud800b".encode("utf-8", "surrogatepass"), "é中".encode()],
           lambda d, f: valid_text(text(d)), (), _encodable),
]


@contextlib.contextmanager
def address_space_capped() -> Iterator[None]:
    """RLIMIT_AS at what the process maps now plus HEADROOM, restored after: a reader that allocates without bound
    meets MemoryError here rather than the machine's swap."""
    mapped = int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                      if line.startswith("VmSize:"))) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_any_input_is_a_value_or_one_line(reader: Reader, tmp_path: Path,
                                          record_property: Callable[[str, object], None]) -> None:
    seeds = reader.seeds()
    for seed in seeds:  # the valid inputs read: a reader that refuses them is no reader
        reader.holds(reader.read(seed, tmp_path))
    taken = 0

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=SEEDED, database=None,
              suppress_health_check=list(HealthCheck))
    @given(inputs(seeds))
    def one(data: bytes) -> None:
        nonlocal taken
        taken += 1
        try:
            value = reader.read(data, tmp_path)
        except reader.refusals as exc:
            if not reader.shown:
                return
            said = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            lines = said.splitlines()
            assert lines and len(lines) <= reader.lines, f"{reader.name} refused in {said!r}"
            assert all(line.startswith(lines[0].split(": ", 1)[0]) for line in lines), said  # each names the file
            assert "\x1b" not in said, said  # no terminal escape printed back
            return
        reader.holds(value)

    with address_space_capped():
        one()
    record_property("fuzz_inputs", f"{reader.name}={taken}")
    assert taken >= min(EXAMPLES, 10)
