"""`harness sim`: the bundled simulator's own commands, with `fit` and `validate` (which use harness tools the
simulator package itself never imports)."""

from __future__ import annotations

from harness.cli.twin import fit_cmd, validate_cmd
from harness.cli.twin_one import twin_cmd
from harness.run.simulator import simulator_cli

sim = simulator_cli()
for fitting in (fit_cmd, validate_cmd, twin_cmd):
    sim.add_command(fitting)
