"""Where a run speaks while it runs: the plan before the first request, warnings, and its progress.

On a terminal the progress is a rich live view of two lines cut to the terminal's width, and every
warning is printed above it (never into it); elsewhere (a CI log, a pipe) a plain line every few seconds.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from harness.client.backend import Endpoint
from harness.clock import cancel_quietly
from harness.config.load import describe
from harness.config.scenario import Scenario
from harness.redact import printable
from harness.run.progress import Progress
from harness.workload.plan import SessionPlan, plan_phase

LINES_EVERY_S = 10.0  # a CI log gets a line this often: enough to see a run move, few enough to read
LIVE_EVERY_S = 0.5


class Display:
    """Plain text, no progress: the plan and warnings as lines (also the base of the others)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self._task: asyncio.Task[None] | None = None

    def say(self, line: str) -> None:
        self.out.write(printable(line) + "\n")
        self.out.flush()

    def warn(self, message: str) -> None:
        self.say(f"warning: {message}")

    def follow(self, progress: Progress) -> None:
        """Show `progress` from now until `stop`."""

    async def stop(self) -> None:
        await cancel_quietly(self._task)
        self._task = None


class LineDisplay(Display):
    """A plain progress line every `every_s`, for logs that keep every line."""

    def __init__(self, out: TextIO | None = None, every_s: float = LINES_EVERY_S) -> None:
        super().__init__(out)
        self.every_s = every_s

    def follow(self, progress: Progress) -> None:
        self._task = asyncio.ensure_future(self._tick(progress))

    async def _tick(self, progress: Progress) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            self.say(progress.line())


class LiveDisplay(Display):
    """Two lines rewritten in place on a terminal, each cut to its width; anything said goes above them."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(file=sys.stderr, highlight=False)
        # Refreshed from the run's own loop (no refresh thread competing with it); transient: the final
        # table replaces it. Writes to sys.stderr meanwhile (a library's warning) land above it too.
        self._live = Live(console=self.console, auto_refresh=False, transient=True, redirect_stdout=False)

    def say(self, line: str) -> None:
        self.console.print(Text(printable(line)), soft_wrap=False)

    def follow(self, progress: Progress) -> None:
        self._live.start()
        self._task = asyncio.ensure_future(self._tick(progress))

    async def _tick(self, progress: Progress) -> None:
        while True:
            lines = [Text(part, no_wrap=True, overflow="ellipsis") for part in (progress.where(), progress.how())]
            self._live.update(Group(*lines), refresh=True)
            await asyncio.sleep(LIVE_EVERY_S)

    async def stop(self) -> None:
        await super().stop()
        self._live.stop()


def plan_lines(scenario: Scenario, endpoint: Endpoint, bundled: bool, run_dir: Path) -> list[str]:
    """What is about to happen, said before the first request: against what, which phases, where to."""
    sim = scenario.simulator
    declared = scenario.endpoint.accelerator
    target = (f"the bundled simulator ({sim.accelerator}, {sim.model}{sim.slowed}) at {endpoint.base_url}" if bundled
              else endpoint.base_url + (f" ({declared})" if declared else ""))
    phases = scenario.phases
    width = max(len(p.name) for p in phases)
    return [f"run {scenario.name} against {target}",
            f"  model {endpoint.model}, {endpoint.api} API, {len(phases)} phase{'s' * (len(phases) > 1)}:",
            *(f"  {i}/{len(phases)} {p.name:<{width}}  {_load(scenario, i - 1)}{_cap(p.max_in_flight)}"
              for i, p in enumerate(phases, 1)),
            f"  records → {run_dir}"]


def _load(scenario: Scenario, index: int) -> str:
    """The phase's load in words; with sessions, its arrivals are conversations and each turn is a request, so
    the requests to be sent are counted turn by turn."""
    said = describe(scenario.phases[index].load)
    if scenario.workload.sessions is None:
        return said
    plan = plan_phase(scenario, index, "plan")
    assert isinstance(plan, SessionPlan)
    starts = plan.conversations if plan.conversations is not None else range(len(plan.offsets_ns))
    said = said.replace(" req/s", " conversations/s").replace(" requests", " conversations")
    return f"{said} ({sum(plan.source.turns(c) for c in starts)} requests: one per turn)"


def _cap(max_in_flight: int | None) -> str:
    """An in-flight cap, said up front: the requests it holds back wait by design (not client lateness)."""
    return "" if max_in_flight is None else f", at most {max_in_flight} in flight (the cap's wait is not lateness)"


def make_display(mode: str, out: TextIO | None = None) -> Display:
    """`live`, `lines` or `off`; `auto` is live on a terminal and lines elsewhere."""
    out = out or sys.stderr
    if mode == "auto":
        mode = "live" if out.isatty() else "lines"
    if mode == "live":
        return LiveDisplay(Console(file=out, highlight=False))
    return LineDisplay(out) if mode == "lines" else Display(out)
