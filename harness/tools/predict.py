"""`harness predict`: a scenario through the simulator's engine in virtual time, no network, same summary as a
run.

The real `Dispatcher` sends each phase's plan (the same seeded plan `harness run` sends) on a fake clock
to a backend that hands requests to the scenario's simulated engine, stepped by its real-time driver on
that same clock. One implementation of every load model; the records are the ones a perfect client
would have measured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from harness.client.backend import RequestEvents
from harness.client.chunk import Chunk
from harness.client.dialects import dialect
from harness.clock import NS_PER_S, FakeClock, cancel_quietly
from harness.config.scenario import Scenario
from harness.devices.catalogue import catalogue
from harness.errors import UsageError
from harness.records import RequestRecord
from harness.run.dispatch import Dispatcher
from harness.run.header import run_header
from harness.run.pacers.by_plan import run_plan
from harness.run.simulator import check_fits
from harness.sim.build import context_problem
from harness.sim.deployment import build_driver, deployment_context
from harness.sim.engine import SimRequest, StepAccount
from harness.sim.fleet import FleetDriver
from harness.sim.realtime import Snapshot, StepDriver
from harness.sim.requests import completion_prompt, finish_reason, make_request, output_length, parse_body
from harness.sim.vision import encoder_seconds, image_sizes, image_words
from harness.stats.schema import Stress, Summary
from harness.stats.stress import account
from harness.stats.summary import PhaseRun, build_summary
from harness.tokens import token_text
from harness.workload.plan import plan_phase, plan_trace, text_maker
from harness.workload.requests import RequestSpec

_TOKEN = (Chunk(has_content=True),)
_THINKING = (Chunk(has_reasoning=True),)
_DONE = Chunk(done=True)


class EngineBackend:
    """A `Backend` whose server is the step engine, on the dispatcher's own (fake) clock: it refuses what
    the server refuses (a context too long) and gives up when the client would (its timeouts)."""

    def __init__(self, driver: StepDriver | FleetDriver, clock: FakeClock, scenario: Scenario, context: int) -> None:
        self.driver = driver
        self.clock = clock
        self.seed = scenario.simulator.seed
        self.context = context
        c = scenario.client
        self.first_token_ns = None if c.first_token_timeout_s is None else int(c.first_token_timeout_s * NS_PER_S)
        self.request_ns = int(c.request_timeout_s * NS_PER_S)
        device = catalogue().devices[scenario.simulator.accelerator]
        self.overhead_ns = int(device.request_s * 1e9)
        # A reasoning model's first tokens are thinking, as the bundled server streams them (not on
        # completions).
        self.reasoning = scenario.simulator.reasoning_tokens if scenario.endpoint.api != "completions" else 0
        self.vision = scenario.simulator  # images priced as the bundled server prices them (harness.sim.vision)
        self.flops = device.bf16_flops

    def prepare(self, spec: RequestSpec) -> None:
        pass

    async def execute(self, spec: RequestSpec, events: RequestEvents) -> None:
        # The request body the client would send, parsed the way the server parses it.
        body = {"model": "", "prompt": spec.prompt, "max_tokens": spec.max_tokens, "ignore_eos": spec.ignore_eos}
        parsed = parse_body(body, completion_prompt, whole_context=False)
        encode_ns = 0
        if spec.images:  # their tokens join the prompt; the encoder runs before the prefill
            sizes = image_sizes({"messages": [{"content": [{"type": "input_image", "image_url": url}
                                                           for url in spec.images]}]})
            words = image_words(sizes, self.vision.image_patch_px, spec.request_id.encode())
            parsed = replace(parsed, prompt_words=parsed.prompt_words + words)
            if self.flops is not None:
                encode_ns = int(encoder_seconds(sizes, self.vision.image_patch_px, self.vision.vision_encoder_b,
                                                self.flops) * NS_PER_S)
        sent_ns = self.clock.now_ns()
        events.sent()
        if (too_long := context_problem(self.context, parsed)) is not None:
            events.status(400)
            events.failed("http_error", "HTTP 400 invalid_request_error", too_long)
            return
        events.status(200)
        context_left = self.context - parsed.prompt_tokens  # the server shortens max_tokens to it
        answer = output_length(parsed, context_left, self.seed, spec.max_tokens)
        req = make_request(spec.request_id, parsed.prompt_words, answer, sent_ns + self.overhead_ns + encode_ns)
        if self.overhead_ns or encode_ns:  # its way into the engine (a fitted endpoint's HTTP; an image encoder)
            await self.clock.sleep_until(req.arrival_ns)
        loop = asyncio.get_running_loop()
        first, finished = loop.create_future(), loop.create_future()
        req.on_token = _reporter(events, first, finished,
                                 finish_reason(req.output_tokens, parsed, context_left, spec.max_tokens),
                                 self.reasoning)
        self.driver.submit(req)
        first_deadline = None if self.first_token_ns is None else sent_ns + self.first_token_ns
        for fut, deadline, why in ((first, first_deadline, "first token timeout"),
                                   (finished, sent_ns + self.request_ns, "request timeout")):
            if not await self._within(fut, deadline):
                req.on_token = None
                self.driver.abort(req)
                events.failed("timeout", why)
                return

    async def _within(self, fut: asyncio.Future[None], deadline_ns: int | None) -> bool:
        """Whether `fut` completes before the clock reaches `deadline_ns`."""
        if deadline_ns is None:
            await fut
            return True
        timer = asyncio.ensure_future(self.clock.sleep_until(deadline_ns))
        await asyncio.wait((fut, timer), return_when=asyncio.FIRST_COMPLETED)
        await cancel_quietly(timer)
        return fut.done()


def _reporter(events: RequestEvents, first: asyncio.Future[None], finished: asyncio.Future[None],
              reason: str, reasoning: int) -> Callable[[SimRequest], None]:
    def on_token(r: SimRequest) -> None:
        n = len(r.token_ns)
        if n <= reasoning:
            events.chunks(_THINKING)
        else:  # the simulator's own words, when a multi-turn session carries the answer into its next turn
            events.chunks((Chunk(has_content=True, text=token_text(n - 1)),) if events.keep_text else _TOKEN)
        if not first.done():
            first.set_result(None)
        if r.finished:
            usage = Chunk(prompt_tokens=r.prompt_tokens, completion_tokens=n, cached_tokens=r.cached_tokens,
                          finish_reason=reason, reasoning_tokens=min(reasoning, n) if reasoning else None)
            events.chunks((usage, _DONE))
            finished.set_result(None)

    return on_token


async def _phases(scenario: Scenario, clock: FakeClock) -> list[PhaseRun]:
    driver = build_driver(scenario.simulator, clock, settle=clock.end_of_instant)
    backend = EngineBackend(driver, clock, scenario, deployment_context(scenario.simulator))
    dispatcher = Dispatcher(backend, clock, _discard)
    driving = asyncio.ensure_future(driver.run())
    text = text_maker(scenario)
    done = []
    try:
        for i, phase in enumerate(scenario.phases):
            plan = plan_phase(scenario, i, "predict", text)
            before, start_ns = _account(driver.snapshot()), clock.now_ns()
            records = await run_plan(dispatcher, plan, 0.0)
            after = driver.snapshot()
            stress = _phase_stress(before[0], _account(after)[0], (clock.now_ns() - start_ns) / NS_PER_S,
                                   after.peaks, after.preemptions > before[1])
            done.append(PhaseRun(phase, records, trace=plan_trace(plan), stress=stress))
    finally:
        await cancel_quietly(driving)
    return done


def _account(snap: Snapshot) -> tuple[StepAccount, int]:
    """The devices' running account so far (a copy: the engine's own keeps counting), and the preemptions."""
    return replace(snap.stress) if snap.stress is not None else StepAccount(), snap.preemptions


def _phase_stress(before: StepAccount, after: StepAccount, seconds: float,
                  peaks: tuple[float, float] | None, preempted: bool) -> Stress | None:
    if peaks is None:
        return None
    stress = account(after.memory_bound_s - before.memory_bound_s, after.compute_bound_s - before.compute_bound_s,
                     after.hbm_bytes - before.hbm_bytes, after.flops - before.flops, seconds, peaks,
                     "the engine's roofline account of every step, in virtual time")
    if stress is None:
        return None
    # KV capacity when the engine had to preempt; the all-reduces when they took longer than the reads and the
    # arithmetic; else whichever bound most of the step time
    link = after.link_s - before.link_s
    bigger = max(after.memory_s - before.memory_s, after.compute_s - before.compute_s)
    shared = stress.memory_bound_share or 0.0
    binding = ("KV capacity" if preempted else "link" if link > bigger
               else "memory bandwidth" if shared >= 0.5 else "compute")
    return stress.changed(binding=binding)


def _discard(_: RequestRecord) -> None:
    pass


async def predict_runs(scenario: Scenario) -> tuple[Summary, list[PhaseRun]]:
    """The predicted summary and each phase's records (what `harness compare` reads from a run directory)."""
    if not dialect(scenario.endpoint.api).generates:  # the virtual backend streams generated tokens
        raise UsageError(f"endpoint.api {scenario.endpoint.api}: predict models APIs that generate tokens; run this "
                         "one against the bundled simulator (harness run) instead")
    check_fits(scenario.simulator)
    clock = FakeClock()
    task = asyncio.ensure_future(_phases(scenario, clock))
    await clock.run_until_idle(task)
    runs = await task
    return build_summary(scenario, run_header(scenario, "predict", mode="predict"), runs), runs


async def predict_async(scenario: Scenario) -> Summary:
    """`predict` inside a running event loop (`harness search --predict` runs its trials so)."""
    return (await predict_runs(scenario))[0]


def predict(scenario: Scenario) -> Summary:
    """The summary `harness run` would give for `scenario` against its simulated accelerator, in virtual
    time."""
    return asyncio.run(predict_async(scenario))
