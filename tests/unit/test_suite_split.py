"""`make test` runs every test that judges no time; `make test-timing` the ones that do, and CI runs both: between
them every test runs once (issue 65). The split is by the `timing` mark, so a timing test where the timing
target does not look would run nowhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _recipe(target: str) -> list[str]:
    """The pytest lines of a Makefile target (its recipe, continuation lines joined)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    body = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert body is not None, f"no {target} target"
    return [part.strip() for line in body[1].splitlines() for part in line.split(";") if "pytest" in part]


def _timing_marked(path: Path) -> bool:
    """Whether the module marks a test (or itself) `timing`: in code, not inside a string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Attribute) and node.attr == "timing" for node in ast.walk(tree))


def test_the_two_targets_split_the_suite_by_the_timing_mark() -> None:
    (plain,) = _recipe("check")
    assert '-m "not timing" tests/unit tests/integration tests/e2e' in plain
    timed = _recipe("check-timing")
    assert [re.search(r'-m "([^"]+)"', line)[1] for line in timed] == ["timing and pairs",  # type: ignore[index]
                                                                      "timing and not pairs"]
    assert all(line.endswith("tests/integration tests/e2e") for line in timed)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test\b(?!-)", ci, re.M) and re.search(r"^make test-timing\b", ci, re.M), ci


def test_no_unit_test_is_a_timing_test() -> None:
    """The timing target looks in tests/integration and tests/e2e only."""
    marked = [p.name for p in sorted((ROOT / "tests" / "unit").glob("test_*.py")) if _timing_marked(p)]
    assert not marked, f"timing tests in tests/unit, which `make test-timing` never runs: {marked}"
    assert _timing_marked(ROOT / "tests" / "e2e" / "test_twin.py")  # the reading finds one where there is one
