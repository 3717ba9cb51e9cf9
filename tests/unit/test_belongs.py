"""Whose answer is this (`harness.client.belongs`): each sign of a stale or foreign answer, and the honest servers
each one must leave alone."""

from __future__ import annotations

import json

from harness.client.belongs import REMEMBERED, Answered, Provenance, stream_id, wrong_api


def first(answer_id: str, obj: str = "chat.completion.chunk") -> bytes:
    return json.dumps({"id": answer_id, "object": obj, "choices": [{"index": 0, "delta": {"content": "a"}}]}).encode()


LONG_A = "chatcmpl-9f2c1e0b7a4d4f8e"
LONG_B = "chatcmpl-0b7a4d4f8e9f2c1e"


def test_stream_id_is_the_top_level_id_and_only_a_long_one() -> None:
    assert stream_id(first(LONG_A)) == LONG_A.encode()
    assert stream_id(first("chatcmpl-123")) is None  # Ollama's: may repeat by chance
    assert stream_id(b'{"choices":[{"delta":{"content":"\\"id\\": \\"chatcmpl-aaaaaaaaaaaaaaaa\\""}}]}') is None


def test_the_same_long_id_twice_on_one_connection_is_stale() -> None:
    seen = Provenance("chat")
    last = seen.answered(1, "r-1", first(LONG_A))
    why = seen.foreign("r-2", last, first(LONG_A), None)
    assert why is not None and why.startswith("stale answer") and LONG_A in why
    assert seen.foreign("r-2", last, first(LONG_B), None) is None


def test_short_ids_and_no_ids_never_call_an_answer_stale() -> None:
    seen = Provenance("chat")
    last = seen.answered(1, "r-1", first("chatcmpl-123"))
    assert seen.foreign("r-2", last, first("chatcmpl-123"), None) is None
    last = seen.answered(1, "r-1", b'{"choices":[{"delta":{"content":"a"}}]}')
    assert seen.foreign("r-2", last, b'{"choices":[{"delta":{"content":"a"}}]}', None) is None


def test_a_server_with_one_id_for_every_answer_turns_the_id_rule_off() -> None:
    """Seen on two connections, the id is the server's constant, not a replay: the rule stays off."""
    seen = Provenance("chat")
    last = seen.answered(1, "r-1", first(LONG_A))
    seen.answered(2, "r-2", first(LONG_A))
    assert seen.ids_repeat
    assert seen.foreign("r-3", last, first(LONG_A), None) is None


def test_ids_seen_on_one_connection_only_keep_the_rule_on() -> None:
    seen = Provenance("chat")
    for n in range(3):
        seen.answered(1, f"r-{n}", first(f"{LONG_A}{n}"))
    assert not seen.ids_repeat


def test_the_memory_of_ids_is_bounded() -> None:
    seen = Provenance("chat")
    for n in range(REMEMBERED + 10):
        seen.answered(n, f"r-{n}", first(f"{LONG_A}-{n}"))
    assert len(seen._where) == REMEMBERED
    assert not seen.ids_repeat


def test_the_echoed_request_id_of_the_previous_request_is_stale() -> None:
    seen = Provenance("chat")
    last = Answered("run-0-1", None)
    why = seen.stale_echo("run-0-2", last, "run-0-1")
    assert why is not None and "run-0-1" in why and "X-Request-Id" in why
    assert seen.stale_echo("run-0-2", last, "run-0-2") is None  # its own
    assert seen.stale_echo("run-0-2", last, "req_8f1c") is None  # the server's own ids (OpenAI's API writes them)
    assert seen.stale_echo("run-0-2", None, "run-0-1") is None  # a fresh connection has no previous request


def test_an_answer_that_echoes_this_request_is_its_own_whatever_its_id() -> None:
    seen = Provenance("chat")
    last = seen.answered(1, "r-1", first(LONG_A))
    assert seen.foreign("r-2", last, first(LONG_A), "r-2") is None


def test_the_other_apis_answer_is_foreign() -> None:
    assert wrong_api("chat", first(LONG_A, "text_completion")) is not None
    assert wrong_api("completions", first(LONG_A, "chat.completion.chunk")) is not None
    assert wrong_api("chat", first(LONG_A, "chat.completion.chunk")) is None
    assert wrong_api("completions", first(LONG_A, "text_completion")) is None
    assert wrong_api("chat", b'{"choices":[]}') is None
    why = Provenance("completions").foreign("r-1", None, first(LONG_A), None)
    assert why is not None and why.startswith("foreign answer") and "completions request" in why


def test_a_hostile_id_is_escaped_in_the_reason() -> None:
    seen = Provenance("chat")
    payload = b'{"id":"chatcmpl-\x1b]0;owned\x07-aaaaaaaaaaaa","choices":[]}'  # raw control bytes in the id
    last = seen.answered(1, "r-1", payload)
    why = seen.foreign("r-2", last, payload, None)
    assert why is not None and "\x1b" not in why
    echo = seen.stale_echo("r-2", Answered("r-\x1b[2J", None), "r-\x1b[2J")
    assert echo is not None and "\x1b" not in echo
