"""`harness predict`: a scenario through the simulator's engine in virtual time, no network, same summary as a run.

The real `Dispatcher` sends each phase's plan (the same seeded plan `harness run` sends) on a fake clock
to a backend that hands requests to the scenario's simulated engine, stepped by its real-time driver on
that same clock. One implementation of every load model; the records are the ones a perfect client
would have measured.
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness import __version__
from harness.client.backend import RequestEvents
from harness.client.sse import Chunk
from harness.clock import FakeClock, cancel_quietly
from harness.config.scenario import Scenario
from harness.records import RequestRecord
from harness.run.dispatch import Dispatcher
from harness.run.runner import run_plan
from harness.run.simulator import check_fits
from harness.sim.engine import SimRequest
from harness.sim.realtime import StepDriver
from harness.sim.requests import make_request, output_length, parse_body
from harness.sim.server import build_engine
from harness.stats.summary import PhaseRun, build_summary
from harness.workload.plan import plan_phase, text_maker
from harness.workload.requests import RequestSpec

_TOKEN = (Chunk(has_content=True),)
_DONE = Chunk(done=True)


class EngineBackend:
    """A `Backend` whose server is the step engine, on the dispatcher's own (fake) clock."""

    def __init__(self, driver: StepDriver, clock: FakeClock, seed: int) -> None:
        self.driver = driver
        self.clock = clock
        self.seed = seed

    def prepare(self, spec: RequestSpec) -> None:
        pass

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        req = self._sim_request(spec, self.clock.now_ns())
        finished = asyncio.get_running_loop().create_future()

        def on_token(r: SimRequest) -> None:
            events.chunks(_TOKEN)
            if r.finished:
                usage = Chunk(prompt_tokens=r.prompt_tokens, completion_tokens=len(r.token_ns))
                events.chunks((usage, _DONE))
                finished.set_result(None)

        req.on_token = on_token
        events.sent()
        events.status(200)
        self.driver.submit(req)
        await finished

    def _sim_request(self, spec: RequestSpec, arrival_ns: int) -> SimRequest:
        # The request body the client would send, parsed the way the server parses it.
        body = {"model": "", "prompt": spec.prompt, "max_tokens": spec.max_tokens, "ignore_eos": spec.ignore_eos}
        parsed = parse_body(body, chat=False)
        out = output_length(parsed, 1 << 30, self.seed, spec.max_tokens)
        return make_request(spec.request_id, parsed.prompt_words, out, arrival_ns)


async def _phases(scenario: Scenario, clock: FakeClock) -> list[PhaseRun]:
    driver = StepDriver(build_engine(scenario.simulator), clock, settle=clock.end_of_instant)
    dispatcher = Dispatcher(EngineBackend(driver, clock, scenario.simulator.seed), clock, _discard)
    driving = asyncio.ensure_future(driver.run())
    text = text_maker(scenario)
    done = []
    try:
        for i, phase in enumerate(scenario.phases):
            records = await run_plan(dispatcher, plan_phase(scenario, i, "predict", text), 0.0)
            done.append(PhaseRun(phase, records))
    finally:
        await cancel_quietly(driving)
    return done


def _discard(_: RequestRecord) -> None:
    pass


async def predict_async(scenario: Scenario) -> dict[str, Any]:
    """`predict` inside a running event loop (`harness search --predict` runs its trials so)."""
    check_fits(scenario.simulator)
    clock = FakeClock()
    task = asyncio.ensure_future(_phases(scenario, clock))
    await clock.run_until_idle(task)
    s = scenario.simulator
    header = {"run_id": "predict", "scenario": scenario.name, "harness_version": __version__, "seed": scenario.seed,
              "mode": "predict", "simulator": s.model_dump(), "complete": True}
    return build_summary(scenario, header, await task).to_json()


def predict(scenario: Scenario) -> dict[str, Any]:
    """The summary `harness run` would give for `scenario` against its simulated accelerator, in virtual time."""
    return asyncio.run(predict_async(scenario))
