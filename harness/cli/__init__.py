"""The `harness` command line: one thin module per command, errors mapped to exit codes in `errors`.

Exit codes: 0 ok, 2 usage or bad input, 3 harness error (endpoint unreachable, simulator failed), 4 no request
succeeded, 5 `harness compare` could not judge (or `harness search`'s capacity rests on client-limited
trials), 99 a threshold broken or a regression found, 129 the terminal went away (SIGHUP), 130 stopped by
Ctrl-C or SIGTERM (the records taken and the summary are written either way).

Each command's module is imported when that command runs (click's lazy-loading pattern): `harness history add`
or `harness compare` in a nightly job does not pay for importing the load engine, the simulator and the
calibration tools (~0.4 s a process).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from harness import __version__
from harness.cli.peers import peer_hint
from harness.errors import EXIT_STOPPED

# name → "module:attribute" of the click command
COMMANDS = {
    "init": "harness.cli.init:init", "run": "harness.cli.run:run", "merge": "harness.cli.merge:merge",
    "predict": "harness.cli.predict:predict", "plan": "harness.cli.plan:plan",
    "calibrate": "harness.cli.calibrate:calibrate",
    "report": "harness.cli.report:report", "search": "harness.cli.search:search_cmd",
    "compare": "harness.cli.compare:compare", "history": "harness.cli.history:history",
    "trace": "harness.cli.trace:trace", "sim": "harness.cli.sim:sim", "clock": "harness.cli.clock:clock",
    "export": "harness.cli.export:export",
}


def safe_streams() -> None:
    """Output that cannot stop a run: a closed stdout or stderr (`>&- 2>&-`) aborted it inside uvloop, leaving
    an empty run folder; now it writes to /dev/null (the records and the summary are files of their own). A
    terminal that cannot show ✓ or ─ (`PYTHONIOENCODING=ascii`) gets them replaced, not a traceback after the
    results."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        if stream is None or stream.closed:
            replacement = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
            setattr(sys, "stdout" if fd == 1 else "stderr", replacement)
        elif hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


class _Lazy(click.Group):
    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """click's, but a Ctrl-C before a command's own handling (while it starts up) exits 130 with one line,
        like a Ctrl-C during a run, instead of click's "Aborted!" and 1."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        safe_streams()
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.Abort:
            click.echo("stopped before the run began: nothing was sent", err=True)
            sys.exit(EXIT_STOPPED)
        except click.ClickException as exc:
            if isinstance(exc, click.NoSuchOption) and (hint := peer_hint(exc.option_name)) is not None:
                exc = click.NoSuchOption(exc.option_name, f"No such option: {exc.option_name}: here it is {hint}",
                                         ctx=exc.ctx)
            exc.show()
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_Lazy)
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Benchmark LLM inference endpoints with realistic load."""
