"""The simulator answers every API the harness speaks, and what it writes reads back as what it meant: the
tokens, the thinking before the answer, the usage and how it ended — however the bytes are split in reading."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.client.chunk import Chunk
from harness.client.dialects import DIALECTS
from harness.sim.dialects import SPOKEN
from harness.sim.requests import BadRequest, parse_body


def test_every_api_the_harness_speaks_is_answered_by_the_simulator_at_the_same_path() -> None:
    assert {name: d.path for name, d in DIALECTS.items()} == {name: s.path for name, s in SPOKEN.items()}


STREAMED = sorted(name for name, spoken in SPOKEN.items() if spoken.render is not None)


def _answer(api: str, tokens: int, reasoning: int, finish: str = "length", cached: int | None = None) -> bytes:
    render = SPOKEN[api].render
    assert render is not None
    renderer = render(f"{api}-0123456789abcdef", "m", 0, reasoning, 11)
    steps = [renderer.tokens(i, 1) for i in range(tokens - 1)] + [renderer.tokens(tokens - 1, 1, finish=finish)]
    return renderer.opening() + b"".join(steps) + b"".join(renderer.closing(11, tokens, cached, True, finish))


def _read(api: str, wire: bytes, cuts: list[int]) -> list[Chunk]:
    reader = DIALECTS[api].reader(False)
    edges = [0, *sorted(cuts), len(wire)]
    chunks: list[Chunk] = []
    for a, b in itertools.pairwise(edges):
        if reader.plain(wire[a:b]):  # the short way: one plain token of the answer
            chunks.append(Chunk(has_content=True, plain=True))
        else:
            chunks.extend(reader.read(wire[a:b]))
    return chunks


@settings(max_examples=40, deadline=None)
@given(api=st.sampled_from(STREAMED), tokens=st.integers(2, 12), reasoning=st.integers(0, 12),
       cuts=st.lists(st.integers(1, 2000), max_size=8))
def test_what_the_simulator_writes_reads_back_token_for_token(api: str, tokens: int, reasoning: int,
                                                               cuts: list[int]) -> None:
    wire = _answer(api, tokens, reasoning)
    chunks = _read(api, wire, [c for c in cuts if c < len(wire)])
    thought = 0 if api == "completions" else min(reasoning, tokens)
    assert sum(c.has_reasoning for c in chunks) == thought
    assert sum(c.has_content for c in chunks) == tokens - thought
    firsts = [i for i, c in enumerate(chunks) if c.has_content]
    assert all(not c.has_reasoning for c in chunks[firsts[0]:]) if firsts else thought == tokens
    counted = [c.completion_tokens for c in chunks if c.completion_tokens is not None]
    assert counted[-1] == tokens and next(c.prompt_tokens for c in chunks if c.prompt_tokens is not None) == 11
    if api != "completions" and api != "chat":  # chat's finish is read at [DONE] from the chunks before it
        assert [c.finish_reason for c in chunks if c.finish_reason] == ["length"]
    assert chunks[-1].done


def test_the_simulator_says_its_cache_only_where_asked_to() -> None:
    for api in ("responses", "messages"):
        said = [c.cached_tokens for c in _read(api, _answer(api, 3, 0, cached=None), []) if c.cached_tokens]
        assert said == []
        said = [c.cached_tokens for c in _read(api, _answer(api, 3, 0, cached=5), []) if c.cached_tokens is not None]
        assert said == [5] if api == "responses" else said == []  # Anthropic's cache is said at message_start


@pytest.mark.parametrize(("api", "body", "prompt", "cap"), [
    ("responses", {"model": "m", "input": "a b c", "max_output_tokens": 4, "instructions": "be"}, 4, 4),
    ("responses", {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "a b"}]}]},
     2, None),
    ("messages", {"model": "m", "system": [{"type": "text", "text": "x y"}], "max_tokens": 9,
                  "messages": [{"role": "user", "content": "a"}]}, 3, 9),
])
def test_each_api_body_gives_the_prompt_and_the_cap(api: str, body: dict[str, object], prompt: int,
                                                     cap: int | None) -> None:
    spoken = SPOKEN[api]
    parsed = parse_body(body, spoken.prompt, spoken.max_fields, spoken.whole_context)
    assert (parsed.prompt_tokens, parsed.max_tokens) == (prompt, cap)


def test_a_cap_of_zero_is_refused_naming_the_apis_own_field() -> None:
    spoken = SPOKEN["responses"]
    with pytest.raises(BadRequest, match="max_output_tokens must be at least 1"):
        parse_body({"model": "m", "input": "a", "max_output_tokens": 0}, spoken.prompt, spoken.max_fields)


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_a_whole_answer_the_simulator_writes_reads_back(api: str) -> None:
    render = SPOKEN[api].render
    whole = DIALECTS[api].whole
    assert render is not None and whole is not None
    written = render("x-0123456789abcdef", "m", 0, 0, 11).whole(" a b c", "length", 11, 3, None)
    chunk = whole(json.dumps(written).encode())
    assert (chunk.whole, chunk.has_content, chunk.prompt_tokens, chunk.completion_tokens) == (True, True, 11, 3)
    assert chunk.finish_reason == "length" and chunk.error is None
    assert whole(b'{"error": {"message": "busy", "type": "overloaded_error"}}').error == "busy"
