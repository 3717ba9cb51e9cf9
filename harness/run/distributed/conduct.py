"""`harness run --workers N [--ray ADDRESS]`, conducted: the endpoint resolved once (the bundled simulator
started here), each phase planned once (what the parent announces and counts), N workers started as local
processes or Ray actors, their records followed into the live view and exporter, and their shards merged into
the run directory."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from pathlib import Path

from harness.client.backend import Endpoint
from harness.clock import MonotonicClock
from harness.config.scenario import Scenario
from harness.run.display import Display, plan_lines
from harness.run.distributed.hub import Hub
from harness.run.distributed.ray_actors import start_ray_workers
from harness.run.distributed.workers import Link, follow, merge_workers, start_workers
from harness.run.exporter import LiveMetrics
from harness.run.observe import FanOut, RecordObserver
from harness.run.progress import Progress
from harness.run.result import RunResult
from harness.run.signals import USR1_IGNORED, detach_terminal, off_signals, on_signals
from harness.run.target import target
from harness.voice import Voice
from harness.workload.plan import plan_phase
from harness.workload.shards import idle_line


async def run_workers(scenario: Scenario, run_dir: Path, url: str | None, model: str | None, api: str | None,
                      key: str | None, headers: tuple[tuple[str, str], ...], display: Display,
                      metrics: LiveMetrics | None, n: int, ray_address: str | None) -> tuple[RunResult, list[str]]:
    """The merged run, and a line for each worker that died. `headers`: the gateway's, resolved."""
    async with target(scenario, url=url, model=model, api=api, api_key=key, headers=headers, pin=False,
                      voice=display) as (endpoint, bundled):
        for line in plan_lines(scenario, endpoint, bundled, run_dir):
            display.say(line)
        plans = [plan_phase(scenario, i, "count") for i in range(len(scenario.phases))]
        for phase, plan in zip(scenario.phases, plans, strict=True):
            if (idle := idle_line(phase.name, plan, n, who="worker")) is not None:
                display.say(f"  {idle}")
        work = run_dir / "workers"
        links = await _start(scenario, endpoint, work, n, ray_address, bundled, display)
        progress = Progress(MonotonicClock(), len(scenario.phases))
        watchers: list[tuple[str, RecordObserver]] = [("the progress line", progress)]
        if metrics is not None:
            watchers.append(("the live exporter", metrics))
        hub = Hub(scenario, plans, n, lambda i, line: links[i].send(line), FanOut(watchers=watchers, voice=display))
        display.follow(progress)
        forward = Forward(links, display, work)
        installed = on_signals(asyncio.get_running_loop(), forward)
        try:
            await follow(links, hub, display, work)
        finally:
            off_signals(asyncio.get_running_loop(), installed)
            hub.close()
            await display.stop()
            for link in links:  # stopped or failed here: the workers stop too (SIGTERM: their records kept)
                link.stop()
            for link in links:
                await link.finish()
        return merge_workers(scenario, plans, links, hub, run_dir, bundled, forward.signal)


class Forward:
    """Ctrl-C, SIGTERM, SIGQUIT or SIGHUP to the parent of the workers (who have their own process group: a
    terminal's Ctrl-C reaches the parent alone) is passed on to each worker as one SIGTERM: the first stops
    their sending and lets what is in flight end, the second cancels it, a third kills them. They end, and
    their shards are merged as ever; the merged run says it was stopped."""

    def __init__(self, links: Sequence[Link], voice: Voice, work: Path) -> None:
        self.links, self.voice, self.work = links, voice, work
        self.signal: str | None = None
        self.count = 0

    def __call__(self, sig: signal.Signals) -> None:
        if sig == signal.SIGUSR1:
            self.voice.warn(USR1_IGNORED)
            return
        if sig == signal.SIGHUP:
            detach_terminal()
        self.signal = self.signal or sig.name
        self.count += 1
        if self.count == 1:
            self.voice.warn(f"{sig.name}: the workers stop sending and finish their requests in flight (again to "
                            "cancel them); their shards are merged when they end (by hand: harness merge "
                            f"{self.work}/*/*)")
        elif self.count == 2:
            self.voice.warn(f"{sig.name}: the workers cancel their requests in flight (again to kill them)")
        for link in self.links:
            if self.count > 2:
                link.abandon(f"{sig.name} three times")
            else:
                link.stop()


async def _start(scenario: Scenario, endpoint: Endpoint, work: Path, n: int, ray_address: str | None,
                 bundled: bool, display: Display) -> list[Link]:
    if ray_address is None:
        display.say(f"  {n} worker processes, one shard each: {work}")
        return await start_workers(scenario, endpoint, work, n, spare_last_core=bundled)
    display.say(f"  {n} Ray actors (cluster {ray_address}), one shard each: {work}")
    links = await start_ray_workers(scenario, endpoint, work, n, ray_address)
    for link in links:  # kept on the node whatever happens to this driver
        display.say(f"  worker {link.index} writes its records at {link.where}")
    return links
