"""No module outside harness/devices asks which kind a device is or sniffs its name (issue 63): a kind's behaviour
is its own method, a device's quirk its own data."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"Accelerator", "AsicAccelerator", "FittedAccelerator"}
SOURCES = sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])


def _outside(path: Path) -> bool:
    return "devices" not in path.relative_to(ROOT).parts


def _device_names() -> set[str]:
    from harness.devices import builtin

    return {d.name for d in builtin.DEVICES}


def _sniffs(tree: ast.AST, names: set[str]) -> list[str]:
    """`"a100" in name`, `name.startswith("b200")`, `name == "h100-sxm"`: a text that is (part of) a device's name
    tested against another."""
    found = []
    for node in ast.walk(tree):
        texts: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            texts = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "startswith", "endswith"):
            texts = list(node.args)
        for text in texts:
            if isinstance(text, ast.Constant) and isinstance(text.value, str) and len(text.value) >= 3 and any(
                    c.isdigit() for c in text.value) and any(text.value.lower() in name for name in names):
                found.append(f"line {node.lineno}: {text.value!r}")
    return found


def test_no_isinstance_on_a_device_kind_outside_the_package() -> None:
    found = []
    for path in filter(_outside, SOURCES):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
                kinds = ast.walk(node.args[1]) if len(node.args) > 1 else iter(())
                if any(isinstance(k, ast.Name) and k.id in KINDS for k in kinds):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"a device's kind checked outside harness/devices: {found}"


def test_no_device_name_is_sniffed_outside_the_package() -> None:
    names = _device_names()
    found = [f"{path.relative_to(ROOT)} {hit}" for path in filter(_outside, SOURCES)
             for hit in _sniffs(ast.parse(path.read_text(encoding="utf-8")), names)]
    assert not found, f"a device told by its name outside harness/devices: {found}"


def test_the_checks_see_a_sniff_and_a_kind_check() -> None:
    names = _device_names()
    assert _sniffs(ast.parse('x = "a100" in name.lower()\ny = name.startswith("b200")'), names) == [
        "line 1: 'a100'", "line 2: 'b200'"]
    assert _sniffs(ast.parse('x = "nvlink" in links'), names) == []
