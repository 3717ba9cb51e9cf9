"""The strict base of every scenario model: unknown keys are errors, values are frozen."""

from __future__ import annotations

import re
from typing import Annotated, Any, Self
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from harness.config.units import as_millis, as_seconds, number_text, unit_of
from harness.limits import PLANNED_REQUESTS, RATE, TOKENS
from harness.redact import printable, without_userinfo

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
# Ceilings on what a scenario may ask for (harness/limits.py), checked as it is read: one line, exit 2
Requests = Annotated[int, Field(gt=0, le=PLANNED_REQUESTS)]
TokenCount = Annotated[int, Field(gt=0, le=TOKENS)]
Rate = Annotated[float, Field(gt=0, le=RATE)]
# Durations: a number in the field's unit, or a text with its own (`30s`, `5m`, `500ms`).
Seconds = Annotated[float, BeforeValidator(as_seconds), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(as_seconds), Field(gt=0)]
Millis = Annotated[float, BeforeValidator(as_millis), Field(ge=0)]
PositiveMillis = Annotated[float, BeforeValidator(as_millis), Field(gt=0)]


_HOST_PORT = re.compile(r"^(?=[^:]*[A-Za-z.])[A-Za-z0-9.-]+:\d{1,5}$")


def web_url(url: str) -> str:
    """An http(s) URL with a host, as every URL the harness takes must be: `host:port` alone means
    `http://host:port` (as Prometheus' clients take it); a bare `55289` or `ftp://…` is refused (ValueError),
    not sent somewhere off the machine. A `user:password@` is dropped: never sent, printed or saved."""
    if "://" not in url and _HOST_PORT.match(url):
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host (e.g. http://host:9091)")
    try:
        port = parts.port
    except ValueError:  # past 65535, or not a number
        port = 0
    if port == 0:
        raise ValueError("its port is not a number from 1 to 65535")
    # `HTTPS://` is https (urlsplit lowers the scheme it reports, not the text every later check reads)
    return without_userinfo(urlunsplit(parts._replace(scheme=parts.scheme)))


WebUrl = Annotated[str, AfterValidator(web_url)]


class Changeable(BaseModel):
    """A frozen model changed only through `changed`: pydantic's `model_copy(update=…)` validates nothing (a
    misspelt field is dropped, a text kept in a bool field), so harness/ never calls it
    (tests/unit/test_layers.py)."""

    def changed(self, **fields: Any) -> Self:
        """A copy with `fields` set, validated as a new model is: an unknown field or a wrong value raises."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**current, **fields})


class Strict(Changeable):
    # NaN and infinity are no setting (YAML's `.nan`, `--rate inf`): refused as not finite, not as "over
    # 1000000"
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def first_error(exc: ValidationError) -> str:
    """A validation error in one line: where (the dotted field path) and what, pydantic's prefix taken off."""
    err = exc.errors()[0]
    where = printable(".".join(str(part) for part in err["loc"]), one_line=True)  # a key may hold a line break
    return f"{where + ': ' if where else ''}{error_text(err)}"


_BOUNDS = {"greater_than": ("more than", "gt"), "greater_than_equal": ("at least", "ge"),
           "less_than": ("less than", "lt"), "less_than_equal": ("at most", "le")}


def error_text(err: Any) -> str:
    """What one of pydantic's errors says, in the harness's words: a number out of range given in the field's
    unit with the bound it passed ("-3 req/s: must be more than 0 req/s"), never "Input should be …"."""
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    # the field's own name: the last key that is not pydantic's name for a union member (`constrained-int`,
    # `Dist`)
    unit = unit_of(next((part for part in reversed(err["loc"]) if isinstance(part, str) and "-" not in part
                         and not part[:1].isupper()), ""))
    if kind == "finite_number":
        return f"{err['input']} is not a finite number{f' (of {unit})' if unit else ''}"
    if kind in _BOUNDS and isinstance(err["input"], int | float):
        words, key = _BOUNDS[kind]
        return f"{number_text(err['input'], unit)}: must be {words} {number_text(err['ctx'][key], unit)}"
    return str(err["msg"]).removeprefix("Value error, ")
