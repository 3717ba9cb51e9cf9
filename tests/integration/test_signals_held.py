"""Signals after a run, while its results are made (`results_kept`, as the CLI runs): a real signal to this
process is said and held off, the summary is written; one more abandons them; the handlers before are back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.report.files import write_run
from harness.run.runner import run_scenario
from harness.run.signals import results_kept
from harness.voice import Heard

TINY = {"name": "tiny", "workload": {"prompt_tokens": 16, "output_tokens": 4}, "endpoint": {"scrape_interval_s": 0},
        "phases": [{"name": "p", "load": {"type": "constant", "rate": 50, "requests": 5}}]}


def _signal_self(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.2)  # a Python-level handler runs in this thread at the next instruction: it has by now


async def test_a_signal_while_results_are_written_is_held_and_the_summary_kept(sim_url: str, tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    said: list[str] = []
    with results_kept(Heard(warned=said)):
        result = await run_scenario(parse_scenario(TINY, "test"), Endpoint(sim_url, "llama-3.1-8b"), tmp_path / "r")
        _signal_self(signal.SIGINT)  # the run is over: its handlers are off, the hold is on
        _signal_self(signal.SIGUSR1)  # said, never counted as the second
        write_run(result, Heard(warned=said))
        assert (tmp_path / "r" / "summary.json").is_file() and (tmp_path / "r" / "report.html").is_file()
        assert said[0] == "SIGINT: the run has ended and its results are being written (again to abandon them)"
        assert said[1].startswith("SIGUSR1: the run has ended")
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGTERM)  # the second stopping signal: abandoned
    assert signal.getsignal(signal.SIGINT) is before
    assert result.summary.run.stopped is None  # the run itself was whole


async def test_without_results_kept_a_run_leaves_the_handlers_as_they_were(sim_url: str, tmp_path: Path) -> None:
    """Code that runs a scenario in-process (a library user, these tests) keeps its own Ctrl-C."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    await run_scenario(parse_scenario(TINY, "test"), Endpoint(sim_url, "llama-3.1-8b"), tmp_path / "r")
    after = {sig: signal.getsignal(sig) for sig in before}
    assert after == before, (before, after)
