"""The JSON door (issue 64): outside JSON — `--extra-body`, summary.json — ends in a value or one line naming what
was wrong, never a traceback (60,000 brackets deep raised RecursionError) and never a non-finite number sent on as
null (`{"temperature": NaN}` went out as `null`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.cli.request_flags import _json_object
from harness.doors import json_value
from harness.errors import ScenarioError
from harness.limits import JSON_DEPTH
from harness.stats.schema import read_summary
from harness.voice import QUIET, Heard

# `make fuzz` runs the door's property tests long (and says how many inputs each took); `make test` short, seeded
EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "200"))


@pytest.mark.parametrize(("text", "says"), [
    ('{"temperature": NaN}', "NaN is not a JSON number"),
    ('{"temperature": Infinity}', "Infinity is not a JSON number"),
    ('{"temperature": -Infinity}', "-Infinity is not a JSON number"),
    ('{"temperature": 1e999}', "1e999 is too large"),
    ('{"seed": ' + "9" * 5000 + "}", "digits) is too large"),
    ("[" * 60_000 + "]" * 60_000, "nested 60,000 deep"),
    ('{"a": "[[[[[[[[[["}', None),  # brackets inside a string are text, not depth
])
def test_each_kind_of_hostile_json_is_one_line(text: str, says: str | None) -> None:
    if says is None:
        assert json_value(text) == {"a": "[[[[[[[[[["}
        return
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")) as caught:
        json_value(text)
    assert "\n" not in str(caught.value)


def test_extra_body_refuses_non_finite_numbers_and_what_the_harness_measures_by() -> None:
    for text, says in (('{"temperature": NaN}', "NaN"), ('{"max_completion_tokens": 5}', "win over the max_tokens"),
                       ('{"stream_options": {"include_usage": false}}', "counts tokens by"),
                       ('{"stream_options": "yes"}', "counts tokens by")):
        with pytest.raises(click.BadParameter, match=says):
            _json_object(text)
    assert _json_object('{"stream_options": {"continuous_usage_stats": true}}')  # other options: merged
    body = _json_object('{"temperature": 0.5, "chat_template_kwargs": {"enable_thinking": false}}')
    assert body["temperature"] == 0.5


def test_a_summary_nested_too_deep_is_named_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ScenarioError, match=r"summary\.json: cannot read a summary \(JSON nested 100,001 deep"):
        read_summary(path)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.text(max_size=8)
                           | st.floats(allow_nan=False, allow_infinity=False),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=4), max_leaves=20)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 1000)
@given(json_values)
def test_any_finite_json_reads_back_as_itself(value: object) -> None:
    assert json_value(json.dumps(value)) == value


@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 1000)
@given(st.text(max_size=64) | st.binary(max_size=64).map(lambda b: b.decode("latin-1")))
def test_any_text_is_a_value_or_one_line(text: str) -> None:
    try:
        json_value(text)
    except ValueError as exc:
        assert "\n" not in str(exc)


def test_the_depth_limit_is_where_the_docs_say() -> None:
    json_value("[" * JSON_DEPTH + "]" * JSON_DEPTH)
    with pytest.raises(ValueError, match="nested"):
        json_value("[" * (JSON_DEPTH + 1) + "]" * (JSON_DEPTH + 1))


@pytest.mark.parametrize(("flags", "says"), [
    ({"api_key_header": "Host"}, "Host: set by the HTTP client"),
    ({"api_key_header": "content-length"}, "content-length: set by the HTTP client"),
    ({"api_key_header": "X-Key\r\nX-Evil: 1"}, "is not a header name"),
    ({"api_key_header": "api-key", "headers": ("api-key: literal",)}, "a header of that name is given too"),
])
def test_a_key_header_the_framing_owns_or_given_twice_is_one_line_exit_2(flags: dict[str, object], says: str) -> None:
    """Issue 64: these were pydantic ValidationError tracebacks, and a key header equal to a --header name sent the
    header and dropped the key from every request without a word."""
    from harness.cli.request_flags import RequestFlags, with_request_flags
    from harness.config.scenario import parse_scenario

    scenario = parse_scenario({"name": "k", "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1,
                                                                            "requests": 1}}]}, "test")
    with pytest.raises(click.UsageError, match=says) as caught:
        with_request_flags(scenario, RequestFlags(**flags), QUIET)  # type: ignore[arg-type]
    assert caught.value.exit_code == 2 and "\n" not in caught.value.format_message()


def test_an_extra_body_replacing_the_exact_length_fields_is_said_with_its_consequence() -> None:
    """Issue 64: `min_tokens` or `ignore_eos` in the extra body replace the harness's own silently."""
    from harness.cli.request_flags import RequestFlags, with_request_flags
    from harness.config.scenario import parse_scenario

    said: list[str] = []
    for workload, expect in (({}, True), ({"ignore_eos": False}, False)):
        said.clear()
        scenario = parse_scenario({"name": "k", "workload": workload, "endpoint": {"extra_body": {"min_tokens": 4}},
                                   "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1,
                                                                     "requests": 1}}]}, "test")
        with_request_flags(scenario, RequestFlags(), Heard(warned=said))
        assert any("min_tokens replace the harness's own" in line for line in said) is expect


@pytest.mark.parametrize(("error", "says"), [
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)",
     "has expired"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch, certificate is not valid for "
     "'staging'. (_ssl.c:1006)", "not for the host in the URL"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch, certificate is not valid for "
     "'10.0.0.1'. (_ssl.c:1006)", "not for the host in the URL"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate "
     "(_ssl.c:1006)", "not trusted (--ca-bundle"),
    ("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1006)",
     "not trusted (--ca-bundle"),
    ("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)", "may not speak TLS here (try http://)"),
])
def test_each_tls_failure_gets_its_own_hint(error: str, says: str) -> None:
    """Issue 64: the expired, hostname and unknown-CA failures each their own hint (OpenSSL's own words)."""
    from harness.client.tls import tls_hint

    assert says in tls_hint("https://staging:8443/v1", error)


@pytest.mark.parametrize(("url", "kept"), [
    ("HTTP://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # a scheme in capitals is the same scheme
    ("Https://gw.example/v1", "https://gw.example/v1"),
    ("http://user:secret@127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # userinfo dropped
    ("127.0.0.1:9091", "http://127.0.0.1:9091"),
])
def test_the_url_door_keeps_a_url_in_one_form(url: str, kept: str) -> None:
    from harness.config.base import web_url

    assert web_url(url) == kept


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://127.0.0.1:0/v1", "http://h:port/v1",
                                 "ftp://h/v1", "55289"])
def test_the_url_door_refuses_a_port_out_of_range_or_another_scheme_in_one_line(url: str) -> None:
    from harness.config.base import web_url

    with pytest.raises(ValueError) as caught:
        web_url(url)
    assert "\n" not in str(caught.value)
