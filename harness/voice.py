"""How a module speaks to the person running it: one small typed object handed down with the work.

A line said (`say`: the plan, a step taken, a note) and a warning (`warn`: something the person should act on
or know when reading the figures) are the two things any module says. The run's display is a voice (on a
terminal it prints above the progress lines), the CLI's `ECHO` is one (cli/errors.py), `QUIET` says nothing,
and `Heard` keeps what it was told for a caller that reports it later (and for tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol


class Voice(Protocol):
    def say(self, line: str) -> None:
        """A line for the person running it, as is."""

    def warn(self, message: str) -> None:
        """A warning; the voice marks it as one."""


class _Quiet:
    def say(self, line: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


QUIET: Final[Voice] = _Quiet()


@dataclass
class Heard:
    """A voice that keeps what it is told, in order."""

    said: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.said.append(line)

    def warn(self, message: str) -> None:
        self.warned.append(message)


@dataclass(frozen=True)
class Reworded:
    """`voice` with every warning rewritten first (a prefix naming who speaks, a secret taken out)."""

    voice: Voice
    how: Callable[[str], str]

    def say(self, line: str) -> None:
        self.voice.say(line)

    def warn(self, message: str) -> None:
        self.voice.warn(self.how(message))
