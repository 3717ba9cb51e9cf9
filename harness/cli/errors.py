"""The one boundary where errors become exit codes: every documented error class (harness.errors) maps to
its code with a one-line message and hint; Ctrl-C to 130. Nothing else is caught."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar

import click

from harness.errors import EXIT_STOPPED, HarnessError
from harness.redact import printable
from harness.voice import Voice

F = TypeVar("F", bound=Callable[..., Any])


def warn(message: str) -> None:
    click.echo(f"warning: {printable(message)}", err=True)


class _Echo:
    """The CLI's voice outside a run: lines and warnings on stderr, through click (safe on any terminal)."""

    def say(self, line: str) -> None:
        click.echo(printable(line), err=True)

    def warn(self, message: str) -> None:
        warn(message)


ECHO: Final[Voice] = _Echo()


def fail(message: str, code: int) -> SystemExit:
    click.echo(f"error: {printable(message)}", err=True)
    return SystemExit(code)


def guarded(command: F) -> F:
    """Run a click command body inside the error boundary."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HarnessError as exc:
            raise fail(f"{exc} ({exc.hint})", exc.exit_code) from None
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise fail("stopped: requests in flight cancelled; every record taken is on disk", EXIT_STOPPED) from None

    return wrapper  # type: ignore[return-value]
