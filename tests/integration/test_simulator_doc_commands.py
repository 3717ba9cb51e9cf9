"""Every command docs/simulator.md shows (issue 45): each names a real command with options that exist, and those
that need nothing beyond this repository (no endpoint, no file of the reader's own) run and exit 0."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "simulator.md"


def shown_commands() -> list[str]:
    """`harness …` lines of the fenced blocks, continuation lines joined, comments and [optional] brackets off."""
    commands: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("harness "):
                commands.append(re.sub(r"\[([^\]]*)\]", r"\1", line.split("  #")[0]).strip())
    return commands


COMMANDS = shown_commands()


def test_the_docs_show_commands() -> None:
    assert len(COMMANDS) >= 8, COMMANDS


def _parse(args: list[str]) -> click.Command:
    """Resolve the subcommand and parse its options as click would, without running it: an unknown command or
    option raises."""
    command: click.Command = main
    ctx = command.make_context("harness", list(args), resilient_parsing=True)
    known: set[str] = set()
    while isinstance(command, click.Group):
        # click 8.2+ keeps the subcommand's name apart (public `protected_args` is deprecated, 9.0 folds it in)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None, f"no command {name!r}"
        command, ctx = sub, sub.make_context(name or "", rest, parent=ctx, resilient_parsing=True)
    assert not ctx.args or any(p.nargs == -1 for p in command.params), f"left over: {ctx.args}"
    # resilient parsing passes over an unknown option: every one shown must be the command's
    known.update(opt for p in command.params for opt in (*p.opts, *p.secondary_opts))
    unknown = [w.split("=")[0] for w in args if w.startswith("-") and w.split("=")[0] not in known]
    assert not unknown, f"no such option: {unknown}"
    return command


@pytest.mark.parametrize("line", COMMANDS)
def test_each_command_shown_parses(line: str) -> None:
    _parse(shlex.split(line)[1:])


def _self_contained(line: str) -> bool:
    words = shlex.split(line)[1:]
    files = [w for w in words if w.endswith((".yaml", ".yml"))]
    return ("http" not in line and "URL" not in line and "*" not in line and "serve" not in words
            and all((ROOT / f).is_file() for f in files))


RUNNABLE = [line for line in COMMANDS if _self_contained(line)]
# ~100 s on a 2-core machine: tests/unit/test_matrix.py runs the same matrix on its own fixed-seed scenario
SLOW = {"scenarios/choose-accelerator.yaml": "the five-accelerator matrix takes ~100 s; test_matrix.py runs it"}


def test_some_commands_are_run() -> None:
    assert len([line for line in RUNNABLE if not any(key in line for key in SLOW)]) >= 2, RUNNABLE


@pytest.mark.parametrize("line", [
    pytest.param(line, marks=[pytest.mark.skip(reason) for key, reason in SLOW.items() if key in line])
    for line in RUNNABLE])
def test_each_self_contained_command_runs(line: str) -> None:
    args = shlex.split(line)[1:]
    done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), line
