"""The package's import graph, measured (docs/architecture.md, "The import graph, measured").

Read with `ast`, module-level imports only (what importing a module loads; an import inside a function is
loaded when it runs, and `if TYPE_CHECKING:` blocks never): the modules, the imports between them, the ones
running up a layer (tests/unit/test_layers.py refuses any), and for each entry point given, how many of the
package's modules importing it loads — its own, those it imports, theirs, and every package on the way.

    .venv/bin/python bench/import_graph.py harness.cli.run harness.run.runner harness.run.distributed.conduct
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"
LAYERS = ["core", "config", "workload", "client", "stats", "run", "report", "tools", "cli"]
CORE = {"errors", "clock", "tokens", "records", "gctune", "redact", "loop"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "vendor" not in p.parts}


def layer(module: str) -> str:
    parts = module.split(".")
    return "core" if len(parts) < 2 or parts[1] in CORE else parts[1]


def _statements(tree: ast.Module) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        out += node.body if isinstance(node, ast.If | ast.Try) else [node]
    return out


def imports(module: str) -> set[str]:
    """The package's modules `module` imports at module level (`from a import b` counts a.b when b is one)."""
    found: set[str] = set()
    for node in _statements(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found & set(MODULES)


GRAPH = {m: imports(m) for m in MODULES}


def loads(start: str) -> set[str]:
    """Every module of the package that importing `start` loads, packages included."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [p for i in range(1, len(parts)) if (p := ".".join(parts[:i])) in MODULES]
        todo += GRAPH[m]
    return seen


def _up(source: str, target: str) -> bool:
    a, b = layer(source), layer(target)
    return "sim" not in (a, b) and source != "harness.__main__" and LAYERS.index(b) > LAYERS.index(a)


def main(entries: list[str]) -> None:
    files = [m for m, p in MODULES.items() if p.name != "__init__.py"]
    edges = sum(len(v) for v in GRAPH.values())
    up = sorted(f"{m} -> {t}" for m, v in GRAPH.items() for t in v if _up(m, t))
    print(f"{len(files)} modules (+{len(MODULES) - len(files)} package __init__s), {edges} module-level imports "
          f"between them, {len(up)} running up a layer{': ' + ', '.join(up) if up else ''}")
    for entry in entries:
        direct = [t for t in GRAPH[entry] if MODULES[t].name != "__init__.py"]
        reached = [m for m in loads(entry) if MODULES[m].name != "__init__.py" and m != entry]
        print(f"{entry}: imports {len(direct)} of the package's modules directly, loads {len(reached)} in all")


if __name__ == "__main__":
    main(sys.argv[1:] or ["harness.cli.run", "harness.run.runner"])
