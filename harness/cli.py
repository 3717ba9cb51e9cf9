"""The `harness` command line: thin click commands over the library."""

from __future__ import annotations

import click

from harness import __version__
from harness.sim.cli import sim


@click.group()
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Benchmark LLM inference endpoints with realistic load."""


main.add_command(sim)
