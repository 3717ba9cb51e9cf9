"""Which of the package's modules a quick `harness run` actually calls into, and how often a call runs back up
a layer (a lower layer calling a higher one: a callback, a hook, a collaborator attached after the fact) —
docs/architecture.md, "The import graph, measured".

The run is a real one, in this process, against the bundled simulator (its own process, not counted): every
Python call between two of the package's modules, in every thread, is seen by a profile hook. An edge is a
(caller module, callee module) pair, counted once however many calls cross it.

The entry walk is what a reader follows from `harness run` to the first request's send
(`harness.run.worker.run_request`): the package's functions called before it (stays; not comprehensions or
lambdas, nor what a module's body calls while it is imported), their modules (rooms),
and the module-to-module calls among them that go up a layer or back into a module the walk had already left
(climbs: each makes the reader turn back).

    .venv/bin/python bench/call_graph.py [--requests 20]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from import_graph import LAYERS, layer  # noqa: E402

PACKAGE = str(ROOT / "harness") + "/"


def _module(filename: str) -> str | None:
    if not filename.startswith(PACKAGE):
        return None
    parts = Path(filename).relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


Walk = list[tuple[str | None, str, str]]  # (caller module, callee module, callee function), in call order


def trace(argv: list[str]) -> tuple[set[str], set[tuple[str, str]], Walk]:
    called: set[str] = set()
    edges: set[tuple[str, str]] = set()
    cache: dict[str, str | None] = {}
    walk: Walk = []
    sent = threading.Event()

    def hook(frame: FrameType, event: str, _: object) -> None:
        if event != "call" or frame.f_back is None or not frame.f_code.co_flags & inspect.CO_NEWLOCALS:
            return  # a module's or a class's body runs once, at import: not a call the run makes
        callee = cache.setdefault(frame.f_code.co_filename, _module(frame.f_code.co_filename))
        if callee is None:
            return
        called.add(callee)
        caller = cache.setdefault(frame.f_back.f_code.co_filename, _module(frame.f_back.f_code.co_filename))
        if caller is not None and caller != callee:
            edges.add((caller, callee))
        if not sent.is_set() and not frame.f_code.co_name.startswith("<") and not _importing(frame):
            walk.append((caller, callee, frame.f_code.co_qualname))
            if callee == "harness.run.worker" and frame.f_code.co_name == "run_request":
                sent.set()

    from harness.cli import main

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        main.main(argv, standalone_mode=False)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return called, edges, walk


def _importing(frame: FrameType) -> bool:
    """A call a module's body makes while it is imported (building a table, a registry): not a step of the run."""
    at: FrameType | None = frame
    while at is not None:
        if at.f_code.co_name == "<module>" and at.f_code.co_filename.startswith(PACKAGE):
            return True
        at = at.f_back
    return False


def entry_walk(walk: Walk) -> tuple[int, int, int]:
    """Stays, rooms and climbs of the walk to the first send (see the module's docstring)."""
    stays = {(module, name) for _, module, name in walk}
    rooms = {module for _, module, _ in walk}
    seen: set[str] = set()
    climbs: set[tuple[str, str]] = set()
    for caller, callee, _ in walk:
        if caller is not None and caller != callee and (_up(caller, callee) or callee in seen):
            climbs.add((caller, callee))
        seen.add(callee)
    return len(stays), len(rooms), len(climbs)


def _up(caller: str, callee: str) -> bool:
    a, b = layer(caller), layer(callee)
    return "sim" not in (a, b) and caller != "harness.__main__" and LAYERS.index(b) > LAYERS.index(a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as reports:
        called, edges, walk = trace(["run", "--rate", "20", "--requests", str(args.requests), "--output-tokens", "16",
                               "--prompt-tokens", "32", "--progress", "off", "--reports-dir", reports])
    up = sorted(f"{a} -> {b}" for a, b in edges if _up(a, b))
    print(f"a quick `harness run` of {args.requests} requests calls into {len(called)} of the package's modules, "
          f"across {len(edges)} module-to-module edges; {len(up)} of them run back up a layer:")
    for line in up:
        print(f"  {line}")
    stays, rooms, climbs = entry_walk(walk)
    print(f"the entry walk to the first send: {stays} stays (functions), {rooms} rooms (modules), {climbs} climbs")


if __name__ == "__main__":
    main()
