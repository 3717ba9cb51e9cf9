"""Every bound on outside input is named once (harness/limits.py) and documented as it is (docs/failures.md)."""

from __future__ import annotations

import re
from pathlib import Path

from harness import limits

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_table_is_the_modules() -> None:
    assert limits.markdown() in (ROOT / "docs" / "failures.md").read_text(encoding="utf-8"), \
        "docs/failures.md's Limits table differs: paste `python -m harness.limits` into it"


def test_every_limit_is_in_the_table_and_used() -> None:
    defined = {name for name, value in vars(limits).items() if name.isupper() and isinstance(value, int)}
    assert defined == {row.name for row in limits.TABLE}
    used = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "harness").rglob("*.py") if p.name != "limits.py")
    assert [name for name in defined if not re.search(rf"\b{name}\b", used)] == []


def test_no_module_names_a_limit_of_its_own() -> None:
    """A limit defined beside its reader is one nobody finds: `*_LIMIT = …` anywhere else fails here (the
    simulator's are its model's: TP_LIMIT, the widest tensor parallelism it prices)."""
    own = [f"{p.relative_to(ROOT)}:{m.group(1)}" for p in (ROOT / "harness").rglob("*.py") if "sim" not in p.parts
           for m in re.finditer(r"^(_?[A-Z_]*_LIMIT|MAX_[A-Z_]*BYTES)\s*=", p.read_text(encoding="utf-8"), re.M)]
    assert own == []


def test_values_are_shown_in_their_units() -> None:
    assert [limits.shown(n) for n in ("JSON_BYTES", "RESPONSE_HEADER_BYTES", "DATASET_BYTES", "SPAN_S", "RATE",
                                      "JSON_DEPTH")] == \
        ["64 MiB", "64 KiB", "4 GiB", "30 days", "1,000,000 req/s", "200 levels"]
