"""Harness errors and their exit codes.

    HarnessError (exit 3)        the run cannot go on: endpoint unreachable at start, simulator failed
    ScenarioError (exit 2)       bad input: scenario file or field (defined in harness.scenario)

Request failures are never exceptions: they are records with a status (harness.records).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_HARNESS = 3
EXIT_REGRESSION = 99
EXIT_STOPPED = 130  # Ctrl-C or SIGTERM, as shells report a SIGINT


class HarnessError(RuntimeError):
    """A one-line reason the run could not go on."""
