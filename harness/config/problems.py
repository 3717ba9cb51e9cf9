"""A scenario's validation errors said as its problems: one line each, naming the file and the field as the user
wrote it (pydantic's names for union members left out), the likeliest complaint of each field, at most ten."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from harness.config.base import error_text
from harness.config.load import LOAD_TAGS
from harness.redact import printable


def _union_member(part: int | str) -> bool:
    """pydantic's name for a union member (constrained-int, LengthDist, a load tag), not a key."""
    return isinstance(part, str) and (part in LOAD_TAGS or "-" in part or part[:1].isupper())


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _union_member(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return printable(out, one_line=True) or "(top level)"  # a YAML key may hold a line break or an escape


_WRONG_KIND = {"int_type", "int_parsing", "model_type", "dict_type", "model_attributes_type", "float_type",
               "float_parsing"}


def _rank(error: Any) -> int:
    """Which of several errors to report: an unknown key (the likeliest typo), then a bad value, then a
    wrong kind of value — for a field that takes an integer or a mapping, the member the user was
    writing says more than the one they were not."""
    if error["type"] == "extra_forbidden":
        return 0
    return 2 if error["type"] in _WRONG_KIND else 1


_MAX_PROBLEMS = 10


def problems(exc: ValidationError, source: str) -> str:
    """Every problem of the scenario, one line each (capped): for a field that could take several shapes,
    only the likeliest complaint (see `_rank`)."""
    best: dict[tuple[int | str, ...], Any] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        root = next((loc[:i] for i, part in enumerate(loc) if _union_member(part)), loc)
        if root not in best or _rank(err) < _rank(best[root]):
            best[root] = err
    lines = [f"{source}: {_field_path(e['loc'])}: {error_text(e)}" for e in sorted(best.values(), key=_rank)]
    if len(lines) > _MAX_PROBLEMS:
        lines = [*lines[:_MAX_PROBLEMS], f"{source}: … and {len(lines) - _MAX_PROBLEMS} more problems"]
    return "\n".join(lines)
