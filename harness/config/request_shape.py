"""What a user adds to every request besides the workload: a gateway's headers, sampling fields, an engine's
own body fields. Pure: parsing, checking and merging, no I/O beyond the environment mapping passed in.

A header's value is a secret until shown otherwise (tenant ids, `api-key:`): `env:NAME` names where it comes
from, and that reference is all a saved scenario keeps; a literal value is sent but saved as `[REDACTED]`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field

from harness.config.base import Strict
from harness.redact import MARK, variable_shown

# RFC 9110 token characters: a name outside them is not a header any server reads.
_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_ENV = "env:"
# Set by the harness from the workload or needed to measure: a body field may not replace them.
RESERVED_BODY = {"model": "the endpoint's model (--model)", "stream": "always true: the harness measures streams",
                 "messages": "the workload's prompts", "prompt": "the workload's prompts",
                 "max_tokens": "the workload's output tokens (--output-tokens)", "n": "one answer per request",
                 "max_completion_tokens": "the workload's output tokens (--output-tokens): it would win over the "
                                          "max_tokens the harness sends and change every answer's length"}
# A JSON object a user gives for request bodies, passed through as given (its fields are the engine's
# business).
Body = dict[str, object]
# Headers the HTTP framing owns.
RESERVED_HEADERS = {"host", "content-length", "content-type", "transfer-encoding", "connection"}


class Sampling(Strict):
    """Sampling fields sent with every request (OpenAI's, and vLLM/SGLang's top_k, min_p,
    repetition_penalty)."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    top_k: Annotated[int, Field(ge=-1)] | None = None
    min_p: Annotated[float, Field(ge=0, le=1)] | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0)] | None = None


def check_header(name: str, value: str) -> None:
    """ValueError naming what is wrong with one header (the value itself is never quoted)."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a header name")
    if name.lower() in RESERVED_HEADERS:
        raise ValueError(f"{name}: set by the HTTP client, not by a scenario")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"{name}: its value holds a line break")


def parse_header(text: str) -> tuple[str, str]:
    """`'Name: value'` as curl and AIPerf take it, or `Name=value` as vLLM's bench does, as (name, value);
    ValueError otherwise. Neither ':' nor '=' can be in a header's name, so the first of them ends it."""
    cuts = [at for at in (text.find(":"), text.find("=")) if at > 0]
    if not cuts or not text[:min(cuts)].strip():
        raise ValueError("expected 'Name: value' (e.g. 'X-Org: acme', or 'api-key: env:AZURE_KEY')")
    name, value = text[:min(cuts)].strip(), text[min(cuts) + 1:].strip()
    check_header(name, value)
    return name, value


def resolve(headers: Mapping[str, str], environ: Mapping[str, str], where: str) -> tuple[tuple[str, str], ...]:
    """The values to send: `env:NAME` read from `environ`; ValueError naming the header (`where`: the flag or
    the scenario field) when a variable is unset or a value was redacted when saved."""
    out = []
    for name, value in headers.items():
        if value.startswith(_ENV):
            variable = value[len(_ENV):]
            if not environ.get(variable):
                raise ValueError(f"{where} {name}: environment variable {variable_shown(variable)} is not set")
            value = environ[variable]
        elif value == MARK:
            raise ValueError(f"{where} {name}: its value was not saved with the run (literal header values never "
                             f"are): give it again with --header '{name}: …', or as env:NAME")
        check_header(name, value)
        out.append((name, value))
    return tuple(out)


def merged(scenario: Mapping[str, str], flags: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The scenario's headers with the flags' over them (names compared without case, as HTTP does)."""
    out = {name: value for name, value in scenario.items() if name.lower() not in {n.lower() for n, _ in flags}}
    out.update(flags)
    return out


def saved(headers: Mapping[str, str]) -> dict[str, str]:
    """What a saved scenario keeps of the headers: the `env:` references, literal values redacted."""
    return {name: value if value.startswith(_ENV) else MARK for name, value in headers.items()}


def check_body(extra: Mapping[str, Any]) -> None:
    """ValueError for a field the harness must set itself."""
    for key in extra:
        if key in RESERVED_BODY:
            raise ValueError(f"{key}: set by the harness ({RESERVED_BODY[key]})")
    options = extra.get("stream_options")
    if options is not None and (not isinstance(options, dict) or options.get("include_usage", True) is not True):
        raise ValueError("stream_options: merged with the harness's own, which asks every stream for its usage "
                         "(include_usage: true, the usage it counts tokens by); give other options, not that one "
                         "off")


def body_fields(sampling: Sampling | None, extra: Mapping[str, Any]) -> Body:
    """What every request's body gains: the sampling fields given, then the extra body over them."""
    out = sampling.model_dump(exclude_none=True) if sampling is not None else {}
    out.update(extra)
    return out
