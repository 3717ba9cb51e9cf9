"""Every command's --help ends with examples, and every flag an example uses is one the command has: an
example that drifted from its command fails here, not in a newcomer's terminal."""

from __future__ import annotations

import shlex

import click
import pytest

from harness.cli import main


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        out += _commands(cmd, (*path, name)) if isinstance(cmd, click.Group) else [((*path, name), cmd)]
    return out


COMMANDS = _commands(main)  # type: ignore[arg-type]


@pytest.mark.parametrize(("path", "cmd"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_each_command_shows_examples_that_use_only_its_own_flags(path: tuple[str, ...], cmd: click.Command) -> None:
    if path == ("sim", "presets"):
        pytest.skip("takes no options: nothing to show by example")
    with click.Context(cmd, info_name=" ".join(path)) as ctx:
        text = cmd.get_help(ctx)
    assert "Examples:" in text, path
    after = [line.strip() for line in text.rsplit("Examples:", 1)[1].splitlines() if line.strip()]
    examples = after[:next((i for i, line in enumerate(after) if not line.startswith("harness ")), len(after))]
    assert examples, path
    flags = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    for line in examples:
        words = shlex.split(line)
        assert words[:1 + len(path)] == ["harness", *path], line
        used = {w.split("=", 1)[0] for w in words if w.startswith("--")}
        assert used <= flags, (line, used - flags)
