"""A run's tags: `--label k=v` (short, few, fit to be Prometheus label values) and `--metadata FILE` (a flat
mapping of facts: the commit, the engine's version, the GPU driver). Both are stored in summary.json and
travel to the CSV and vLLM exports, the history and the metrics; so each is bounded, and a value that looks
like a key or a token is refused rather than written into all of them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.limits import LABEL_VALUE_CHARS, LABELS, METADATA, METADATA_VALUE_CHARS

_KEY = re.compile(r"[a-z_][a-z0-9_]{0,31}")
# The exporter's and the Pushgateway's own label names: a run label of the same name would clash with them.
RESERVED = frozenset({"scenario", "phase", "shard", "status", "reason", "quantile", "le", "job", "instance",
                      "metric", "limit", "repeat"})
# Prefixes of the tokens people paste (OpenAI, Anthropic, Hugging Face, GitHub, Slack, AWS, a JWT) …
_TOKEN_PREFIX = re.compile(r"^(sk-|sk_|hf_|ghp_|gho_|ghs_|github_pat_|xox[abprs]-|AKIA|ASIA|eyJ)")
# … and any long unbroken run of letters and digits mixing both: what a key looks like, not a tag.
_OPAQUE = re.compile(r"(?=[A-Za-z0-9_\-+/=]*[0-9])(?=[A-Za-z0-9_\-+/=]*[A-Za-z])[A-Za-z0-9_\-+/=]{32,}")
Scalar = str | int | float | bool | None


def secret_like(value: str) -> bool:
    """A value that reads like a key or a token rather than a tag (a 40-hex commit id is a tag: kept)."""
    if re.fullmatch(r"[0-9a-f]{7,40}", value):
        return False
    return bool(_TOKEN_PREFIX.match(value) or _OPAQUE.search(value))


def parse_label(text: str) -> tuple[str, str]:
    """`k=v` (the `--label` flag) as a pair; a ValueError saying what is wrong."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r}: give KEY=VALUE")
    return key.strip(), value.strip()


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels, or a ValueError naming the first one that is not fit to be everywhere a label goes."""
    if len(labels) > LABELS:
        raise ValueError(f"{len(labels)} labels: at most {LABELS}")
    for key, value in labels.items():
        if not _KEY.fullmatch(key):
            raise ValueError(f"label {key!r}: a name of lower-case letters, digits and _ (at most 32), as "
                             "Prometheus takes it")
        if key in RESERVED:
            raise ValueError(f"label {key!r}: the harness's metrics use that name already")
        _check_value(f"label {key}", value, LABEL_VALUE_CHARS)
    return dict(labels)


def check_metadata(data: Mapping[str, Any]) -> dict[str, Scalar]:
    """A flat mapping of scalars, or a ValueError naming the first entry that is too big, nested or
    secret-looking."""
    if len(data) > METADATA:
        raise ValueError(f"{len(data)} metadata entries: at most {METADATA}")
    out: dict[str, Scalar] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not 0 < len(key) <= 64 or not key.isprintable():
            raise ValueError(f"metadata key {str(key)[:64]!r}: a printable name of at most 64 characters")
        if value is not None and not isinstance(value, str | int | float | bool):
            raise ValueError(f"metadata {key!r}: a string, number, true/false or null (not a list or a mapping)")
        if isinstance(value, str):
            _check_value(f"metadata {key}", value, METADATA_VALUE_CHARS)
        out[key] = value
    return out


def _check_value(what: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ValueError(f"{what}: {len(value)} characters, at most {limit}")
    if not value.isprintable():
        raise ValueError(f"{what}: holds a control character")
    if secret_like(value):
        raise ValueError(f"{what}: the value looks like a key or a token (not stored; give a tag)")
