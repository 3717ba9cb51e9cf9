"""The simulator's HTTP surface: an OpenAI-compatible streaming server over a timing driver."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import cast

from aiohttp import web

from harness.clock import NS_PER_MS, NS_PER_S, MonotonicClock, cancel_quietly
from harness.config.simulator import ERROR_TYPES, SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.sim import embeddings
from harness.sim.admission import Admission, unauthorised
from harness.sim.deployment import build_driver, deployment_context
from harness.sim.dialects import SPOKEN, MakeRenderer, Renderer, Spoken
from harness.sim.engine import SimRequest
from harness.sim.faults import FaultInjector, FaultPlan, emit_faulty
from harness.sim.fleet import FleetDriver
from harness.sim.fleet_metrics import FleetSeries
from harness.sim.gate import Gate
from harness.sim.inspection import Inspection
from harness.sim.lateness import LateSteps
from harness.sim.metrics import SimMetrics
from harness.sim.openai_shapes import answer_text, error_response
from harness.sim.realtime import Driver, FixedTimingDriver
from harness.sim.requests import (
    BadRequest,
    ParsedRequest,
    finish_reason,
    make_request,
    output_length,
    parse_body,
)
from harness.sim.tokenize import tokenize_handler
from harness.sim.truth import GroundTruth
from harness.sim.vision import encoder_seconds, image_sizes, image_words
from harness.sim.writes import StreamWrites

Emit = Callable[[int, int], Awaitable[None]]
# What a request's intake costs (~0.25 ms: HTTP, JSON, its prompt hashed) on this project's 2-core machine, with
# room: started closer than this to a step's deadline, it waits the step out.
INTAKE_NS = NS_PER_MS


class SimServer:
    def __init__(self, cfg: SimulatorConfig, api_key: str | None = None, gate: Gate | None = None,
                 live_lateness: bool = True) -> None:
        self.cfg = cfg
        self.clock = MonotonicClock(nap_ns=NS_PER_MS, **({"spin_ns": 3 * NS_PER_MS} if _own_core() else {}))
        self.metrics = SimMetrics(cfg.name)
        self.driver: Driver
        self.max_model_len = cfg.max_model_len or catalogue().models[cfg.model].max_model_len
        if cfg.timing == "fixed":
            self.driver = FixedTimingDriver(int(cfg.fixed_ttft_ms * cfg.slowdown * NS_PER_MS),
                                            int(cfg.fixed_itl_ms * cfg.slowdown * NS_PER_MS),
                                            self.clock, self._observe_lateness, cfg.stream_writes == "token")
        else:
            self.max_model_len = deployment_context(cfg)
            self.driver = build_driver(cfg, self.clock, self._observe_lateness)
            if isinstance(self.driver, FleetDriver):
                self.metrics.registry.register(FleetSeries(self.driver))
        self.faults = FaultInjector(cfg.faults)
        device = catalogue().devices.get(cfg.accelerator)
        # A fitted twin's time outside its steps, as predict adds it: what the fitted endpoint spent on each
        # request before its engine saw it (its own HTTP and parsing, beyond this server's).
        self._overhead_s = device.request_s if device is not None else 0.0
        self.ground_truth = GroundTruth()
        self._ids = itertools.count()
        self.admission = Admission(cfg, api_key, gate or Gate(), self.clock,
                                   self.clock.now_ns() + int(cfg.startup_delay_s * NS_PER_S), self.driver,
                                   self.max_model_len)
        self.lateness = LateSteps(live_lateness)
        self._driver_task: asyncio.Task[None] | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for spoken in SPOKEN.values():
            app.router.add_post(f"/v1/{spoken.path}", self._answering(spoken))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.prometheus)
        app.router.add_post("/tokenize", tokenize_handler(self.max_model_len, self.admission.authorised,
                                                          unauthorised))
        app.router.add_routes(Inspection(self.driver, self.faults, self.ground_truth, self.admission.authorised,
                                         unauthorised).routes())
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _: web.Application) -> None:
        self._driver_task = asyncio.create_task(self.driver.run())

    async def _stop(self, _: web.Application) -> None:
        await cancel_quietly(self._driver_task)
        if (line := self.lateness.summary()) is not None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def _observe_lateness(self, late_ns: int) -> None:
        self.metrics.observe_step_lateness(late_ns)
        if (line := self.lateness.observe(late_ns)) is not None:
            sys.stderr.write(line + "\n")

    def _answering(self, spoken: Spoken) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        render = spoken.render

        async def handler(request: web.Request) -> web.StreamResponse:
            if render is None:
                return await self._embed(request)
            return await self._complete(request, spoken, render)
        return handler

    def _request(self, rid: str, words: list[str], out: int, arrival: int) -> SimRequest:
        if self.cfg.timing == "fixed":  # no KV cache to hash for
            return SimRequest(rid, len(words), out, arrival)
        return make_request(rid, words, out, arrival)

    async def _embed(self, request: web.Request) -> web.Response:
        """Each text a prefill-only request (one step: its prompt), the answer whole when all are through."""
        if isinstance(taken := await self.admission.intake(request), web.Response):
            return taken
        arrival, body = taken
        try:
            inputs, size = embeddings.texts(body), embeddings.dimensions(body)
        except BadRequest as exc:
            return error_response(400, str(exc), "invalid_request_error", exc.param)
        if (unknown := self.admission.unknown_model(body.get("model"))) is not None:
            return unknown
        if (longest := max(len(words) for words in inputs)) > self.max_model_len:
            return error_response(400, f"an input of {longest} tokens is past the model's context of "
                                  f"{self.max_model_len}", "invalid_request_error", "input", "context_length_exceeded")
        if (status := self.faults.plan(1).error_status) is not None:
            return error_response(status, "injected fault", ERROR_TYPES[status])
        rid = request.headers.get("X-Request-Id") or f"sim-{next(self._ids)}"
        reqs = [self._request(rid if i == 0 else f"{rid}/{i}", words, 1, arrival) for i, words in enumerate(inputs)]
        for req in reqs:
            self.ground_truth.arrived(req)
        await asyncio.gather(*(self._drive(req, _no_stream) for req in reqs))
        return web.json_response(embeddings.answer(rid, self.cfg.name, int(time.time()), inputs, size),
                                 headers={"X-Request-Id": rid})

    async def models(self, request: web.Request) -> web.Response:
        if (away := self.admission.turned_away(request)) is not None:
            return away
        card = {"id": self.cfg.name, "object": "model", "created": 0, "owned_by": "harness-sim",
                "max_model_len": self.max_model_len}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, _: web.Request) -> web.Response:
        return self.admission.starting() or web.Response(text="ok")

    async def prometheus(self, _: web.Request) -> web.Response:
        body = await self.metrics.render_between_steps(self.driver.snapshot(), self.driver.gate)
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    def _finish_reason(self, req: SimRequest, parsed: ParsedRequest) -> str:
        return finish_reason(req.output_tokens, parsed, self.max_model_len - parsed.prompt_tokens,
                             self.cfg.default_max_tokens)

    async def _complete(self, request: web.Request, spoken: Spoken, render: MakeRenderer) -> web.StreamResponse:
        await self.driver.gate.clear(INTAKE_NS)  # its arrival is stamped already, as its bytes came in
        if isinstance(taken := await self.admission.intake(request), web.Response):
            return taken
        await self.driver.gate.clear(INTAKE_NS)  # again: reading its body may have waited for more bytes
        arrival, body = taken
        try:
            parsed = parse_body(body, spoken.prompt, spoken.max_fields, spoken.whole_context)
            sizes = image_sizes(body)
        except BadRequest as exc:
            return error_response(400, str(exc), "invalid_request_error", exc.param)
        if sizes:  # each image's tokens join the prompt; its encoder runs before the prefill
            seed = (request.headers.get("X-Request-Id") or str(parsed.prompt_crc)).encode()
            parsed = replace(parsed, prompt_words=parsed.prompt_words + image_words(sizes, self.cfg.image_patch_px,
                                                                                    seed))
        if (refused := self.admission.refusal(parsed, spoken.param)) is not None:
            return refused
        out = output_length(parsed, self.max_model_len - parsed.prompt_tokens, self.cfg.seed,
                            self.cfg.default_max_tokens)
        plan = self.faults.plan(out)
        if plan.error_status is not None:
            return error_response(plan.error_status, "injected fault", ERROR_TYPES[plan.error_status])
        rid = request.headers.get("X-Request-Id") or f"sim-{next(self._ids)}"
        req = self._request(rid, parsed.prompt_words, out, arrival)
        req.finish_reason = self._finish_reason(req, parsed)
        self.ground_truth.arrived(req)
        renderer = render(f"{spoken.id_prefix}-{rid}", self.cfg.name, int(time.time()),
                                 self.cfg.reasoning_tokens if spoken.reasoning else 0, req.prompt_tokens)
        device = catalogue().devices.get(self.cfg.accelerator)
        if sizes and device is not None and device.bf16_flops is not None:
            await asyncio.sleep(encoder_seconds(sizes, self.cfg.image_patch_px, self.cfg.vision_encoder_b,
                                                device.bf16_flops) * self.cfg.slowdown)
        if parsed.stream:
            return await self._stream(request, req, parsed, renderer, plan)
        return await self._unary(req, parsed, renderer)

    def _cached(self, req: SimRequest) -> int | None:
        """The prompt tokens its cache served, for usage — only with --enable-prompt-tokens-details, as
        vLLM."""
        return req.cached_tokens if self.cfg.enable_prompt_tokens_details else None

    async def _drive(self, req: SimRequest, emit: Emit) -> None:
        """Run `req` through the driver, calling `emit(first, count)` as its tokens are released."""
        wake = asyncio.Event()
        req.on_token = lambda _: wake.set()
        if self._overhead_s:
            await asyncio.sleep(self._overhead_s)
            req.arrival_ns = self.clock.now_ns()
        self.driver.submit(req)
        seen = 0
        try:
            while not req.finished:
                await wake.wait()
                wake.clear()
                new = len(req.token_ns) - seen
                if new:
                    self.metrics.observe_tokens(req, seen)
                    await emit(seen, new)
                    seen += new
        finally:
            self._ended(req)

    async def _stream(self, request: web.Request, req: SimRequest, parsed: ParsedRequest,
                      renderer: Renderer, plan: FaultPlan) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Request-Id": req.request_id})
        await resp.prepare(request)

        def finish() -> str:
            return self._finish_reason(req, parsed)

        def closing_frames() -> list[bytes]:
            return renderer.closing(req.prompt_tokens, len(req.token_ns), self._cached(req), parsed.include_usage,
                                    finish())

        if plan.clean and request.transport is not None:
            usage_prompt = req.prompt_tokens if parsed.continuous_usage else None
            await self._stream_direct(request.transport, req, renderer, closing_frames, usage_prompt, finish)
            return resp

        async def emit(first: int, count: int) -> None:
            if first == 0 and (opening := renderer.opening()):
                await resp.write(opening)
            await emit_faulty(request, resp, renderer.tokens, plan, self.faults.config.stall_ms, first, count,
                              finish() if req.finished else None)
            if req.finished:
                await resp.write(b"".join(closing_frames()))

        with contextlib.suppress(ConnectionResetError):
            await self._drive(req, emit)
        return resp

    async def _stream_direct(self, transport: asyncio.BaseTransport, req: SimRequest, renderer: Renderer,
                             closing_frames: Callable[[], list[bytes]], usage_prompt: int | None,
                             finish: Callable[[], str]) -> None:
        """Write each step's tokens to the socket from the driver's own callback.

        At thousands of streams, waking one handler task per token per step costs more than the
        engine itself; writing in the callback releases a step's tokens in one pass, at its deadline.
        The body is already chunk-encoded by `prepare`, so each write is framed as one HTTP chunk.
        """
        done = asyncio.Event()
        # uvloop's transports do not subclass asyncio's
        writes = StreamWrites(cast(asyncio.WriteTransport, transport), self.cfg.stream_writes == "token", done.set)
        written = 0

        def on_token(r: SimRequest) -> None:
            nonlocal written
            if writes.closed:  # the client left
                done.set()
                return
            self.metrics.observe_tokens(r, written)
            if written and len(r.token_ns) == written + 1 and not r.finished:  # one token mid-answer: most
                writes.send_one(renderer.tokens(written, 1, usage_prompt))
                written += 1
                return
            last = len(r.token_ns) - 1
            events = [renderer.tokens(i, 1, usage_prompt, finish() if r.finished and i == last else None)
                      for i in range(written, len(r.token_ns))]
            if written == 0 and (opening := renderer.opening()):
                events.insert(0, opening)  # as vLLM: with the first token's step, not at once
            written = len(r.token_ns)
            if r.finished:
                events += closing_frames()
            writes.send(events, last=r.finished)

        req.on_token = on_token
        self.driver.submit(req)
        try:
            await done.wait()
        finally:
            self._ended(req)

    def _ended(self, req: SimRequest) -> None:
        if req.finished:
            self.metrics.observe_ended(req, req.token_ns[-1])
        else:
            self.driver.abort(req)  # the client left: free its slot and blocks now
            self.metrics.observe_ended(req, self.clock.now_ns())
        self.ground_truth.ended(req)  # kept compact from now on: its times, not its engine state

    async def _unary(self, req: SimRequest, parsed: ParsedRequest, renderer: Renderer) -> web.Response:
        await self._drive(req, _no_stream)
        body = renderer.whole(answer_text(0, len(req.token_ns)), self._finish_reason(req, parsed), req.prompt_tokens,
                              len(req.token_ns), self._cached(req))
        return web.json_response(body, headers={"X-Request-Id": req.request_id})


async def _no_stream(first: int, count: int) -> None:
    """A whole answer's tokens go nowhere as they come."""


def _own_core() -> bool:
    """Pinned to one core of several (the bundled simulator, `--pin`): there the last 3 ms before a step's deadline
    are spun rather than slept — a woken core took up to ~2.5 ms to answer — since the CPU it burns is nobody
    else's; sharing cores, it spins the harness's 1.5 ms (a 3 ms spin left `--workers` runs client-limited)."""
    return hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) == 1 and (os.cpu_count() or 1) > 1
