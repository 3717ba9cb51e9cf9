"""A request's shape as the user gives it: headers, sampling and extra body, URLs — parsed, checked and merged
without a network."""

from __future__ import annotations

import orjson
import pytest
import yaml
from pydantic import ValidationError

from harness.client.backend import Endpoint, request_body
from harness.client.chat_chunk import interpret
from harness.client.tls import tls_hint
from harness.client.urls import join_base_and_path, path_and_query, split_request_url, under
from harness.config.request_shape import Sampling, body_fields, merged, parse_header, resolve, saved
from harness.config.scenario import EndpointConfig, Scenario, parse_scenario
from harness.errors import ScenarioError
from harness.redact import MARK, redactor
from harness.workload.requests import RequestSpec


@pytest.mark.parametrize(("text", "expected"), [
    ("X-Org: acme", ("X-Org", "acme")),
    ("api-key:abc:def", ("api-key", "abc:def")),  # curl's form: the first colon ends the name
    ("X-Key=b64==", ("X-Key", "b64==")),  # vLLM's bench form: KEY=VALUE
    ("X-Route: a=b", ("X-Route", "a=b")),
])
def test_headers_parse_in_the_forms_peers_take(text: str, expected: tuple[str, str]) -> None:
    assert parse_header(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("no separator", "expected 'Name: value'"), ("bad name: x", "not a header name"),
    ("Host: elsewhere", "set by the HTTP client"), (": x", "expected"),
])
def test_a_bad_header_is_refused_with_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_header(text)


def test_a_value_with_a_line_break_is_refused_without_being_quoted() -> None:
    data = {"name": "s", "endpoint": {"headers": {"X-Org": "a\r\nInjected: yes"}},
            "phases": [{"name": "p", "load": {"type": "batch", "size": 1}}]}
    with pytest.raises(ScenarioError, match=r"endpoint\.headers: X-Org: its value holds a line break") as caught:
        parse_scenario(data, "s.yaml")
    assert "Injected" not in str(caught.value)


def test_env_values_are_read_and_a_missing_one_names_the_header() -> None:
    assert resolve({"X-Org": "env:ORG", "X-Plain": "p"}, {"ORG": "acme"}, "--header") == (
        ("X-Org", "acme"), ("X-Plain", "p"))
    with pytest.raises(ValueError, match="--header X-Org: environment variable ORG is not set"):
        resolve({"X-Org": "env:ORG"}, {}, "--header")
    with pytest.raises(ValueError, match="not saved"):
        resolve({"X-Org": MARK}, {}, "endpoint.headers")


def test_flags_replace_the_scenarios_header_of_the_same_name_whatever_its_case() -> None:
    assert merged({"x-org": "old", "X-Keep": "k"}, [("X-Org", "new")]) == {"X-Keep": "k", "X-Org": "new"}


def test_a_saved_scenario_keeps_env_references_and_never_a_literal_value() -> None:
    assert saved({"A": "env:A_VALUE", "B": "literal-secret"}) == {"A": "env:A_VALUE", "B": MARK}
    scenario = Scenario.model_validate({"name": "s", "endpoint": {"headers": {"B": "literal-secret"}},
                                        "phases": [{"name": "p", "load": {"type": "batch", "size": 1}}]})
    assert scenario.endpoint.headers == {"B": "literal-secret"}  # in memory, to be sent
    assert "literal-secret" not in scenario.to_yaml()
    assert yaml.safe_load(scenario.to_yaml())["endpoint"]["headers"] == {"B": MARK}


def test_fields_the_harness_measures_by_cannot_be_replaced() -> None:
    for key in ("model", "stream", "max_tokens", "messages", "n"):
        with pytest.raises(ValidationError, match=f"{key}: set by the harness"):
            EndpointConfig(extra_body={key: 1})


def test_sampling_is_checked_and_the_extra_body_goes_over_it() -> None:
    with pytest.raises(ValidationError):
        Sampling(temperature=3)
    cfg = EndpointConfig(sampling=Sampling(temperature=0.5, top_p=0.9), extra_body={"temperature": 0.0, "x": 1})
    assert cfg.body_fields == {"temperature": 0.0, "top_p": 0.9, "x": 1}
    assert body_fields(None, {}) == {}


def test_the_body_gains_the_users_fields_and_keeps_the_usage_it_reads() -> None:
    spec = RequestSpec("r1", "p", 0, "hello", 10, 8, ignore_eos=True)
    body = request_body(spec, "m", "chat", extra={"min_tokens": 2, "stream_options": {"x": True}, "seed": 7})
    assert body["min_tokens"] == 2 and body["seed"] == 7  # the user's engine option wins over the harness's
    assert body["stream_options"] == {"include_usage": True, "x": True} and body["max_tokens"] == 8


def test_the_key_goes_in_the_header_the_gateway_wants() -> None:
    bearer = Endpoint("http://h/v1", "m", api_key="k1", headers=(("X-Org", "acme"),))
    assert bearer.request_headers == {"Authorization": "Bearer k1", "X-Org": "acme"}
    azure = Endpoint("http://h/v1", "m", api_key="k1", api_key_header="api-key")
    assert azure.request_headers == {"api-key": "k1"}
    assert set(bearer.secrets) == {"k1", "acme"} and "acme" not in repr(bearer)
    assert redactor(*bearer.secrets)("k1 and acme and acmex") == f"{MARK} and {MARK} and {MARK}x"


def test_a_gateways_query_stays_after_every_path() -> None:
    base = "https://gw.example/openai/v1?api-version=2024-06-01"
    assert under(base, "models") == "https://gw.example/openai/v1/models?api-version=2024-06-01"
    assert Endpoint(base, "m").url == "https://gw.example/openai/v1/chat/completions?api-version=2024-06-01"
    assert path_and_query(Endpoint(base, "m", api="completions").url) == \
        "/openai/v1/completions?api-version=2024-06-01"


def test_a_pasted_request_url_and_vllms_pair_give_the_base_and_the_api() -> None:
    assert split_request_url("http://h:8000/v1/chat/completions") == ("http://h:8000/v1", "chat")
    assert split_request_url("http://h:8000/v1/completions/") == ("http://h:8000/v1", "completions")
    assert split_request_url("http://h:8000/v1") is None
    assert join_base_and_path("http://h:8000", "/v1/chat/completions") == ("http://h:8000/v1", "chat")
    with pytest.raises(ValueError, match="not a path the harness sends requests to"):
        join_base_and_path("http://h:8000", "/v1/rerank")


def test_reasoning_usage_and_tool_calls_are_read() -> None:
    usage = orjson.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 250,
                                                   "completion_tokens_details": {"reasoning_tokens": 200}}})
    assert interpret(usage).reasoning_tokens == 200
    call = orjson.dumps({"choices": [{"index": 0, "delta": {"content": None, "tool_calls": [
        {"index": 0, "function": {"arguments": "{\"city\":"}}]}}]})
    chunk = interpret(call)
    assert chunk.has_content and chunk.carries_token
    empty = orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {}}]}}]})
    assert not interpret(empty).carries_token


def test_tls_failures_are_named_as_tls() -> None:
    assert "--ca-bundle" in tls_hint("https://h/v1", "ClientConnectorCertificateError certificate verify failed")
    assert "try https://" in tls_hint("http://h/v1", "ServerDisconnectedError Server disconnected")
    assert "try http://" in tls_hint("https://h/v1", "ClientConnectorError [SSL: WRONG_VERSION_NUMBER]")
    assert tls_hint("http://h/v1", "ClientConnectorError Connect call failed") == ""
