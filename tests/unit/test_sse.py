import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.client.chat_chunk import interpret
from harness.client.sse import ChunkReader, SSEDecoder
from harness.errors import BadChunk


def _chat(delta: dict, usage: dict | None = None) -> bytes:
    obj = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    if usage is not None:
        obj = {"id": "x", "choices": [], "usage": usage}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


STREAM = (
    _chat({"role": "assistant", "content": ""})
    + _chat({"content": " Hello"})
    + b": keep-alive comment\n\n"
    + _chat({"content": " big chunk of three"})
    + _chat({}, usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})
    + b"data: [DONE]\n\n"
)


@pytest.mark.parametrize("piece", [1, 3, 7, 64, len(STREAM)])
def test_decoder_yields_same_events_however_the_bytes_are_split(piece: int) -> None:
    dec = SSEDecoder()
    events = []
    for i in range(0, len(STREAM), piece):
        events.extend(dec.feed(STREAM[i:i + piece]))
    events.extend(dec.close())
    assert len(events) == 5
    assert events[-1] == b"[DONE]"
    assert json.loads(events[1])["choices"][0]["delta"]["content"] == " Hello"


def test_crlf_line_endings_and_no_space_after_colon() -> None:
    dec = SSEDecoder()
    assert dec.feed(b'data:{"a":1}\r\n\r\ndata: [DONE]\r\n\r\n') == [b'{"a":1}', b"[DONE]"]


def test_multi_line_data_is_joined_with_newline() -> None:
    assert SSEDecoder().feed(b"data: a\ndata: b\n\n") == [b"a\nb"]


def test_close_flushes_an_event_without_final_blank_line() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: [DONE]") == []
    assert dec.close() == [b"[DONE]"]


def test_role_only_and_empty_chunks_carry_no_token() -> None:
    assert not interpret(_chat({"role": "assistant", "content": ""})[6:-2]).carries_token
    assert not interpret(_chat({})[6:-2]).carries_token


def test_content_reasoning_and_completions_text_carry_tokens() -> None:
    content = interpret(_chat({"content": "hi"})[6:-2])
    assert content.has_content and content.carries_token
    for key in ("reasoning_content", "reasoning"):
        chunk = interpret(_chat({key: "thinking"})[6:-2])
        assert chunk.has_reasoning and chunk.carries_token and not chunk.has_content
    completion = interpret(b'{"choices":[{"index":0,"text":" word","finish_reason":null}]}')
    assert completion.has_content


def test_usage_chunk_and_done() -> None:
    usage = interpret(_chat({}, usage={"prompt_tokens": 5, "completion_tokens": 4})[6:-2])
    assert (usage.prompt_tokens, usage.completion_tokens) == (5, 4)
    assert not usage.carries_token
    assert interpret(b"[DONE]").done


def test_error_object_in_stream() -> None:
    chunk = interpret(b'{"error": {"message": "overloaded", "type": "server_error"}}')
    assert chunk.error == "overloaded"


@pytest.mark.parametrize("payload", [b"{not json", b"[1, 2]"])
def test_malformed_payload_raises_bad_chunk(payload: bytes) -> None:
    with pytest.raises(BadChunk):
        interpret(payload)


texts = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(['"', '\\\\"', '"text":"x', "", "\\"]))


@settings(max_examples=300, deadline=None)
@given(content=texts, reasoning=texts, text=texts, role=st.booleans(), chat=st.booleans())
def test_fast_path_agrees_with_a_full_parse(content, reasoning, text, role, chat) -> None:
    from harness.client.chat_chunk import _parse

    if chat:
        delta: dict[str, object] = {"content": content, "reasoning_content": reasoning}
        if role:
            delta["role"] = "assistant"
        obj: dict[str, object] = {"id": "x", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    else:
        obj = {"id": "x", "choices": [{"index": 0, "text": text, "finish_reason": None}]}
    for payload in (json.dumps(obj).encode(), json.dumps(obj, separators=(",", ":")).encode()):
        fast, full = interpret(payload), _parse(payload)
        assert replace(fast, plain=False) == full
        assert not fast.plain or (fast.carries_token and fast.completion_tokens is None and fast.error is None)


def test_one_event_per_piece_decodes_as_the_stream_split_anywhere() -> None:
    """The shape of vLLM, llama.cpp and TGI streams: each event its own write, so its own piece."""
    pieces = [e + b"\n\n" for e in STREAM.split(b"\n\n") if e]
    dec = SSEDecoder()
    events = [ev for piece in pieces for ev in dec.feed(piece)]
    whole = SSEDecoder().feed(STREAM)
    assert events == whole and len(events) == 5
    crlf = SSEDecoder()
    assert crlf.feed(b"data: {\"a\":1}\r\n\r\n") == [b'{"a":1}']
    two_lines = SSEDecoder()
    assert two_lines.feed(b"data: a\ndata: b\n\n") == [b"a\nb"]


def _event(obj: object) -> bytes:
    import json

    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def test_a_finish_reason_on_a_token_chunk_is_read_at_done() -> None:
    """vLLM puts finish_reason on the last token's chunk (a fast-path chunk), then the usage chunk follows."""
    from harness.client.sse import ChunkReader

    last = _event({"choices": [{"index": 0, "delta": {"content": " x"}, "logprobs": None, "finish_reason": "length",
                                "stop_reason": None}]})
    usage = _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                    "prompt_tokens_details": None})
    for split in (False, True):  # one event per read, or all in one read
        reader = ChunkReader()
        first = reader.read(_event({"choices": [{"index": 0, "delta": {"content": " w"}, "finish_reason": None}]}))
        assert first[0].has_content and first[0].finish_reason is None
        if split:
            chunks = [*reader.read(last), *reader.read(usage), *reader.read(b"data: [DONE]\n\n")]
        else:
            chunks = list(reader.read(last + usage + b"data: [DONE]\n\n"))
        assert chunks[-1].done and chunks[-1].finish_reason == "length"


def test_cached_tokens_from_usage_details_or_llama_cpp_timings() -> None:
    from harness.client.chat_chunk import interpret

    vllm = (b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,'
            b'"prompt_tokens_details":{"cached_tokens":8}}}')
    assert interpret(vllm).cached_tokens == 8
    llama = b'{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"timings":{"cache_n":120,"prompt_n":4}}'
    chunk = interpret(llama)
    assert chunk.cached_tokens == 120 and chunk.finish_reason == "stop"


def test_answer_text_is_kept_only_when_asked() -> None:
    from harness.client.sse import ChunkReader

    event = _event({"choices": [{"index": 0, "delta": {"content": " hello"}}]})
    assert ChunkReader().read(event)[0].text is None
    assert ChunkReader(keep_text=True).read(event)[0].text == " hello"
    completion = _event({"choices": [{"index": 0, "text": " world"}]})
    assert ChunkReader(keep_text=True).read(completion)[0].text == " world"


def _vllm(content: str | None, finish: str | None = None, created: int = 1796333946, **extra: object) -> bytes:
    delta = {} if content is None else {"content": content}
    obj = {"id": "chatcmpl-a58b976d0b6fc2bfd82f23816fc9ad04", "object": "chat.completion.chunk", "created": created,
           "model": "meta-llama/Llama-3.1-8B-Instruct", "system_fingerprint": "fp_vllm_0.11.0",
           "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


VLLM_STREAM = [
    _vllm(""), _vllm(" the"), _vllm(" word"), _vllm("usage"), _vllm('say "hi"'), _vllm("a\nb"), _vllm(" x"),
    _vllm(" y", created=1796333947), _vllm(" z", created=1796333947), _vllm(" reasoning"),
    _vllm(" t", usage={"prompt_tokens": 1, "completion_tokens": 9, "total_tokens": 10}), _vllm("\\"),
    _vllm(" last", "length"), _vllm(None, usage={"prompt_tokens": 1, "completion_tokens": 12, "total_tokens": 13}),
    b"data: [DONE]\n\n",
]


def test_the_short_way_takes_a_repeated_event_by_its_bytes_and_agrees_with_the_long_way() -> None:
    """A plain token event is known by the bytes around its token once one passed every check; whatever it
    takes, the long way reads as one plain token, and whatever it leaves, the long way reads in full."""
    short, long = ChunkReader(), ChunkReader()
    taken = []
    for event in VLLM_STREAM:
        (chunk,) = long.read(event)
        plain_event = chunk.has_content and not chunk.done and chunk.completion_tokens is None and not chunk.error
        if short.plain(event):
            taken.append(event)
            assert plain_event, event
        else:
            assert short.read(event) == (chunk,)
    # The role chunk (empty), the usage chunks and [DONE] went the long way; every token chunk the short way,
    # the repeats by their bytes (a quote or a raw line break in the token is not the same shape).
    assert len(taken) == 10 and _vllm('say "hi"') not in taken and _vllm(" t", usage={
        "prompt_tokens": 1, "completion_tokens": 9, "total_tokens": 10}) not in taken
    assert short.first == long.first
