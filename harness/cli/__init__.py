"""The `harness` command line: one thin module per command, errors mapped to exit codes in `errors`.

Exit codes: 0 ok, 2 usage or bad input, 3 harness error (endpoint unreachable, simulator failed), 4 no request
succeeded,
130 stopped by Ctrl-C or SIGTERM (the records taken and the summary are written).
"""

from __future__ import annotations

import click

from harness import __version__
from harness.cli.calibrate import calibrate
from harness.cli.compare import compare
from harness.cli.history import history
from harness.cli.init import init
from harness.cli.merge import merge
from harness.cli.predict import predict
from harness.cli.report import report
from harness.cli.run import run
from harness.cli.search import search_cmd
from harness.cli.trace import trace
from harness.cli.twin import fit_cmd, validate_cmd
from harness.run.simulator import simulator_cli


@click.group()
@click.version_option(__version__, prog_name="harness")
def main() -> None:
    """Benchmark LLM inference endpoints with realistic load."""


sim = simulator_cli()
for fitting in (fit_cmd, validate_cmd):  # the simulator's own package imports no harness tools
    sim.add_command(fitting)
for command in (init, run, merge, predict, calibrate, report, search_cmd, compare, history, trace, sim):
    main.add_command(command)
