"""docs/architecture.md's module map names every module of the package: a module added without a line there
fails here (issue 33: the map had drifted by ~11 modules)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _map_blocks(tree: str) -> dict[str, str]:
    """The map's text under each package: `run/` holds its own lines and those of its sub-packages."""
    blocks: dict[str, str] = {"": tree.splitlines()[1]}  # the first line: the shared bottom layer's modules
    current = ""
    for line in tree.splitlines()[2:]:
        match = re.match(r"^  (\w+)/", line)
        if match:
            current = match.group(1)
        blocks[current] = blocks.get(current, "") + line + "\n"
    return blocks


def test_every_module_is_in_the_architecture_map() -> None:
    """Each module is named under its own package (and a sub-package's modules under its `name/` line)."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = doc.index("```\nharness/")
    blocks = _map_blocks(doc[start + 4:doc.index("```", start + 4)])
    missing = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        parts = path.relative_to(ROOT / "harness").parts
        if path.name == "__init__.py" or "vendor" in parts:
            continue
        block = blocks.get(parts[0] if len(parts) > 1 else "", "")
        named = re.search(rf"\b{re.escape(path.stem)}\b", block)
        nested = all(re.search(rf"\b{re.escape(sub)}/", block) for sub in parts[1:-1])
        if not (named and nested):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not in docs/architecture.md's module map, under their package: {missing}"


def test_no_test_module_imports_another() -> None:
    """Shared helpers live in tests/helpers.py (and tests/llamacpp_like.py), never in a test module another imports."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
                 if re.search(r"^\s*(from|import) tests\.(unit|integration|e2e)\b", p.read_text(encoding="utf-8"),
                              flags=re.M)]
    assert not offenders, f"test modules importing test modules: {offenders}"


def test_readme_stays_a_newcomers_page() -> None:
    """What it is, the two set-up commands first, the quick run, pointers: reference pages live in docs/."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference material to docs/"
    commands = [line for line in lines[:20] if line.startswith("make ")]
    assert [c.split()[1] for c in commands] == ["demo", "test"], commands


def test_class_names_are_unique_across_the_package() -> None:
    """One `Window`, one `Comparison`: a name means one thing wherever it is imported (issue 33)."""
    import ast
    from collections import defaultdict

    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in (ROOT / "harness").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"class names defined in more than one module: {twice}"


# Untyped summaries and headers, counted: the number may fall (only where data is really free-form), never
# rise. Lower it when a change removes some (issue 65 set both at that day's counts).
DICT_ANY_NOW = 28
ANY_NOW = 179


def test_any_does_not_spread() -> None:
    import re

    count = sum(len(re.findall(r"\bAny\b", p.read_text(encoding="utf-8"))) for p in (ROOT / "harness").rglob("*.py"))
    assert count <= ANY_NOW, f"{count} `Any` in harness/, more than {ANY_NOW}: type it"


def test_untyped_dicts_do_not_spread() -> None:
    count = sum(p.read_text(encoding="utf-8").count("dict[str, Any]") for p in (ROOT / "harness").rglob("*.py"))
    assert count <= DICT_ANY_NOW, (f"{count} `dict[str, Any]` in harness/, more than {DICT_ANY_NOW}: take the typed "
                                   "Summary / PhaseSummary (harness.stats.schema) instead")
