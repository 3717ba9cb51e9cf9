"""A command's flags handed over in typed groups: the flags of one dataclass gathered from the keyword arguments
click passes into one value of it, so a command takes `request: RequestFlags` rather than six loose keywords or a
`**flags: Any` it pops by name (issue 65)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass
from typing import TypeVar, cast

F = TypeVar("F", bound=Callable[..., object])


def gathering(name: str, group: type) -> Callable[[F], F]:
    """Hands the command its `group` flags as one `group` value, keyword `name`, in place of the flags. Apply it
    before the group's click options, so they attach to what click calls."""
    assert is_dataclass(group)
    names = [f.name for f in fields(group)]

    def wrap(command: F) -> F:
        @functools.wraps(command)
        def call(*args: object, **given: object) -> object:
            given[name] = group(**{flag: given.pop(flag) for flag in names})
            return command(*args, **given)

        return cast(F, call)

    return wrap


def with_group(command: F, name: str, group: type, options: Sequence[Callable[[F], F]]) -> F:
    """`command` with the group's click `options` (in the order given, as `--help` shows them) handed over as one
    `group` value, keyword `name`."""
    command = gathering(name, group)(command)
    for option in reversed(options):
        command = option(command)
    return command
