"""The strict base of every scenario model: unknown keys are errors, values are frozen."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from harness.config.units import as_millis, as_seconds

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
# Durations: a number in the field's unit, or a text with its own (`30s`, `5m`, `500ms`).
Seconds = Annotated[float, BeforeValidator(as_seconds), Field(ge=0)]
PositiveSeconds = Annotated[float, BeforeValidator(as_seconds), Field(gt=0)]
Millis = Annotated[float, BeforeValidator(as_millis), Field(ge=0)]
PositiveMillis = Annotated[float, BeforeValidator(as_millis), Field(gt=0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def first_error(exc: ValidationError) -> str:
    """A validation error in one line: where (the dotted field path) and what, pydantic's prefix taken off."""
    err = exc.errors()[0]
    where = ".".join(str(part) for part in err["loc"])
    return f"{where + ': ' if where else ''}{str(err['msg']).removeprefix('Value error, ')}"
