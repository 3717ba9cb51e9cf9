"""Fuzzing: whatever bytes a server sends and however they are split, and whatever YAML a user writes, the
harness raises nothing but its documented error types."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.client.backend import take
from harness.client.chat_chunk import DONE, _parse
from harness.client.chunk import Chunk
from harness.client.sse import ChunkReader
from harness.clock import FakeClock
from harness.config.scenario import load_scenario, parse_scenario
from harness.errors import BadChunk, ScenarioError
from harness.records import RequestRecord
from harness.run.worker import RecordStamper

FRAGMENTS = [b"data: ", b"data:", b"\n", b"\r\n", b"\n\n", b"[DONE]", b"{", b"}", b'"choices"', b":", b"[", b"]",
             b'"delta"', b'{"content": "x"}', b'"usage"', b'{"completion_tokens": 3}', b'"error"', b"1", b"-7",
             b'"lots"', b"null", b",", b"event: x", b": comment", b"\xff\xfe"]
streams = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=40)), max_size=60).map(b"".join)


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_any_bytes_split_anywhere_are_chunks_or_a_bad_chunk(data: bytes, cuts: list[int]) -> None:
    reader = ChunkReader()
    stamper = RecordStamper(RequestRecord("r", "p", 0, 8, 3, 0), FakeClock())
    try:
        for piece in _splits(data, cuts):
            if stamper.chunks(reader.read(piece)):
                break
    except BadChunk:
        return
    rec = stamper.rec
    assert rec.chunk_ns == sorted(rec.chunk_ns)
    assert rec.completion_tokens is None or (isinstance(rec.completion_tokens, int) and rec.completion_tokens >= 0)


@settings(max_examples=200, deadline=None)
@given(streams)
def test_splitting_never_changes_what_a_stream_says(data: bytes) -> None:
    def chunks(pieces: list[bytes]) -> list[object] | str:
        reader = ChunkReader()
        out: list[object] = []
        try:
            for piece in pieces:
                got = reader.read(piece)
                out += [(c.done, c.has_content, c.has_reasoning, c.completion_tokens, c.error) for c in got]
                if any(c.done or c.error is not None for c in got):
                    break  # as every caller does: a stream says nothing after its end
        except BadChunk:
            return "bad"
        return out

    # "bad" on one side only is itself a change made by the splitting: it must fail here too.
    assert chunks([data]) == chunks([data[i:i + 1] for i in range(len(data))])


yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["name", "phases", "load", "type", "rate", "requests",
                                                             "workload", "simulator", "slo", "client", "size",
                                                             "prompt_tokens", "dist", "sweep", "x"]), inner,
                                            max_size=5)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(yaml_values)
def test_any_scenario_data_is_a_scenario_or_one_scenario_error(data: object) -> None:
    try:
        parse_scenario(data, "fuzz.yaml")
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.yaml")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=200), yaml_values.map(lambda d: yaml.safe_dump(d).encode()),
                 yaml_values.map(lambda d: json.dumps(d, default=str).encode())))
def test_any_file_is_a_scenario_or_one_scenario_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(content)
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert str(exc).startswith(str(path))


def _full_read(payload: bytes) -> Chunk:
    """The reference: every payload through the full JSON parse, no fast path."""
    return Chunk(done=True) if payload.strip() == DONE else _parse(payload)


texts = st.one_of(st.just(""), st.text(max_size=8), st.sampled_from(['"', '\\"content\\":\\"x', "\u00e9\u4e2d", " "]))
finish = {"finish_reason": st.one_of(st.none(), st.sampled_from(["stop", "length"]))}
choices = st.one_of(
    st.fixed_dictionaries({"index": st.just(0), "delta": st.fixed_dictionaries({"content": texts})}, optional=finish),
    st.fixed_dictionaries({"index": st.just(0), "delta": st.dictionaries(
        st.sampled_from(["content", "reasoning_content", "reasoning", "role"]), st.one_of(texts, st.none()),
        max_size=3)}, optional=finish),
    st.fixed_dictionaries({"index": st.just(0), "text": texts}))
chunks_ = st.fixed_dictionaries({"id": st.just("c"), "choices": st.lists(choices, min_size=1, max_size=2)},
                                optional={"usage": st.fixed_dictionaries({"prompt_tokens": st.integers(0, 99),
                                                                          "completion_tokens": st.integers(0, 99)}),
                                          "model": texts})
errors = st.fixed_dictionaries({"error": st.one_of(st.text(max_size=6), st.fixed_dictionaries({"message": texts}))})
payloads = st.one_of(chunks_, chunks_, chunks_, errors)  # errors end a stream: a quarter of the payloads
token_streams = st.tuples(st.lists(st.tuples(payloads, st.booleans()), max_size=12), st.booleans(),
                          st.one_of(st.none(), st.lists(st.integers(0, 4000), max_size=10)))  # None: an event a read


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token_streams)
def test_the_fast_path_says_what_the_full_parse_says(
        stream: tuple[list[tuple[dict, bool]], bool, list[int] | None]) -> None:
    """Any stream of OpenAI-shaped chunks (compact or spaced JSON, empty and escaped texts, reasoning, usage,
    errors), ended by [DONE] or not, split anywhere into reads (an event a read among them): the client's path
    (`take`: the one-token short way, the chunk fast path, the full parse for the rest) stamps the same
    tokens at the same times, and ends with the same status, reason and usage, as a reader that fully parses
    every payload."""
    events, done, cuts = stream
    sent = [b"data: " + json.dumps(p, separators=(",", ":") if compact else None).encode() + b"\n\n"
            for p, compact in events] + ([b"data: [DONE]\n\n"] if done else [])
    data = b"".join(sent)
    reads = sent if cuts is None else _splits(data, cuts)

    def stamped(full: bool) -> tuple[object, ...] | str:
        reader = ChunkReader()
        if full:
            reader._interpret = _full_read  # type: ignore[method-assign]
        clock = FakeClock()
        stamper = RecordStamper(RequestRecord("r", "p", 0, 8, 3, 0), clock)
        try:
            for piece in reads:
                clock.advance_to(clock.now_ns() + 1000)  # each read at its own time
                if stamper.chunks(reader.read(piece)) if full else take(reader, stamper, piece):
                    break
            else:
                stamper.ended()
        except BadChunk as exc:
            return f"bad: {exc}"
        r = stamper.rec
        return (r.chunk_ns, r.first_token_ns, r.first_content_ns, r.status, r.reason, r.message,
                r.completion_tokens, r.prompt_tokens, r.chunk_tokens)

    assert stamped(full=False) == stamped(full=True)
