"""The doors outside input comes through, their limits named once in harness/limits.py: a value or a one-line
ValueError naming what was wrong, never a traceback, a non-finite number or an unbounded allocation.

JSON text (a flag's JSON, summary.json, a twin file's cells): at most JSON_BYTES, nested at most
JSON_DEPTH deep (json's parser recurses: deeper input raised RecursionError), and no NaN, Infinity or number
too large for a float (JSON has none; Python's parser accepts them and would send them on as null).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import IO

from harness.limits import JSON_BYTES, JSON_DEPTH, JSON_INT_DIGITS

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (JSON's `\\ud800` parses to one) becomes U+FFFD here, at
    the door, rather than failing every request that sends it (the encoder threw; no record was taken)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number (write a finite number)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large for a number (its float is not finite)")
    return value


def _depth(text: str) -> int:
    """How deep `text`'s brackets nest, counted outside strings (without parsing, so without recursing)."""
    depth = deepest = 0
    quoted = escaped = False
    for char in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def json_value(text: str | bytes, max_bytes: int = JSON_BYTES) -> object:
    """`text` parsed as JSON within the door's limits; ValueError in one line otherwise."""
    if len(text) > max_bytes:
        raise ValueError(f"{len(text):,} bytes of JSON: more than the {max_bytes >> 20:,} MiB read")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 at byte {exc.start}") from None
    # Fewer brackets than the limit cannot nest past it (str.count is C; the scan is Python, for the rare
    # rest)
    if text.count("[") + text.count("{") > JSON_DEPTH and (deep := _depth(text)) > JSON_DEPTH:
        raise ValueError(f"JSON nested {deep:,} deep: more than the {JSON_DEPTH} read")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    # A lone surrogate (`"\\ud800"`, or one argv's surrogateescape made) reached the request encoder and threw
    return _valid_texts(value) if _SURROGATE.search(text) or _ESCAPED_SURROGATE.search(text) else value


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _valid_texts(value: object) -> object:
    """`value` with every text in it, keys too, through `valid_text`."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_valid_texts(v) for v in value]
    if isinstance(value, dict):
        return {valid_text(k): _valid_texts(v) for k, v in value.items()}
    return value


def _int(text: str) -> int:
    if len(text) > JSON_INT_DIGITS:
        raise ValueError(f"{text[:20]}… ({len(text)} digits) is too large a number")
    return int(text)


OVERLONG = "\0 overlong \0\n"  # stands in for a line past the limit; no text file of ours holds NUL


def bounded_lines(fh: IO[str], limit: int) -> Iterator[str]:
    """A text file's lines, each read at most `limit` characters at a time: a longer one (a 0.6 MB gzip of one
    long line took 1.27 GB) comes as OVERLONG, the rest of it read past in pieces and let go."""
    while line := fh.readline(limit):
        if len(line) == limit and not line.endswith("\n"):
            while (rest := fh.readline(limit)) and not rest.endswith("\n"):
                pass
            line = OVERLONG
        yield line
