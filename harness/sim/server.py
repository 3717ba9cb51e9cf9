"""The simulator's HTTP surface: an OpenAI-compatible streaming server over the step engine."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from harness.clock import MonotonicClock
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.kvcache import block_hashes
from harness.sim.metrics import SimMetrics
from harness.sim.openai_shapes import ChunkRenderer, error_response, full_response
from harness.sim.perfmodel import Dtype, build_model
from harness.sim.presets import MODELS
from harness.sim.realtime import RealtimeDriver
from harness.sim.requests import BadRequest, ParsedRequest, output_length, parse_body
from harness.tokens import token_text

_GROUND_TRUTH_KEEP = 200_000  # requests whose token times stay retrievable

Emit = Callable[[int, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SimConfig:
    accelerator: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    served_model_name: str | None = None
    tp: int = 1
    dtype: Dtype = "bf16"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool = True
    max_model_len: int | None = None
    default_max_tokens: int = 256
    seed: int = 0
    noise_sigma: float = 0.03
    api_key: str | None = None

    @property
    def name(self) -> str:
        return self.served_model_name or self.model


def build_engine(cfg: SimConfig) -> Engine:
    perf = build_model(cfg.accelerator, cfg.model, cfg.dtype, cfg.tp)
    kv_blocks = perf.kv_capacity_tokens(cfg.gpu_memory_utilization) // 16
    return Engine(perf, EngineConfig(max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                     kv_blocks=kv_blocks, prefix_caching=cfg.prefix_caching,
                                     noise_sigma=cfg.noise_sigma, seed=cfg.seed))


class SimServer:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.engine = build_engine(cfg)
        self.clock = MonotonicClock()
        self.driver = RealtimeDriver(self.engine, self.clock)
        self.metrics = SimMetrics(cfg.name)
        self.max_model_len = cfg.max_model_len or MODELS[cfg.model].max_model_len
        self.ground_truth: OrderedDict[str, SimRequest] = OrderedDict()
        self._ids = itertools.count()
        self._driver_task: asyncio.Task[None] | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.prometheus)
        app.router.add_get("/sim/requests/{request_id}", self.request_truth)
        app.router.add_get("/sim/status", self.status)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _: web.Application) -> None:
        self._driver_task = asyncio.create_task(self.driver.run())

    async def _stop(self, _: web.Application) -> None:
        if self._driver_task is not None:
            self._driver_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._driver_task

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=False)

    async def models(self, _: web.Request) -> web.Response:
        card = {"id": self.cfg.name, "object": "model", "created": 0, "owned_by": "harness-sim",
                "max_model_len": self.max_model_len}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def prometheus(self, _: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(self.engine),
                            content_type="text/plain", charset="utf-8")

    async def status(self, _: web.Request) -> web.Response:
        lateness = sorted(self.driver.lateness_ns)
        p99 = lateness[int(0.99 * (len(lateness) - 1))] if lateness else None
        return web.json_response({
            "running": len(self.engine.running), "waiting": len(self.engine.waiting),
            "kv_usage": self.engine.kv_usage, "steps": self.driver.steps,
            "preemptions": self.engine.num_preemptions, "step_lateness_p99_ns": p99,
            "resyncs": self.driver.resyncs,
        })

    async def request_truth(self, request: web.Request) -> web.Response:
        req = self.ground_truth.get(request.match_info["request_id"])
        if req is None:
            return error_response(404, "unknown request id", "not_found_error")
        return web.json_response({
            "request_id": req.request_id, "arrival_ns": req.arrival_ns, "prompt_tokens": req.prompt_tokens,
            "output_tokens": req.output_tokens, "token_ns": req.token_ns, "finished": req.finished,
            "aborted": req.aborted, "preemptions": req.preemptions, "scheduled_ns": req.scheduled_ns,
        })

    def _authorised(self, request: web.Request) -> bool:
        return self.cfg.api_key is None or request.headers.get("Authorization") == f"Bearer {self.cfg.api_key}"

    async def _complete(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival = self.clock.now_ns()
        if not self._authorised(request):
            return error_response(401, "invalid or missing API key", "authentication_error",
                                  code="invalid_api_key")
        try:
            parsed = parse_body(await request.json(), chat)
        except BadRequest as exc:
            return error_response(400, str(exc), "invalid_request_error", exc.param)
        except ValueError:
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if parsed.model != self.cfg.name:
            return error_response(404, f"the model '{parsed.model}' does not exist", "not_found_error",
                                  "model", "model_not_found")
        context_left = self.max_model_len - parsed.prompt_tokens
        if context_left <= 0 or (parsed.max_tokens or 0) > context_left:
            return error_response(
                400, f"this model's maximum context length is {self.max_model_len} tokens; the request has "
                f"{parsed.prompt_tokens} prompt tokens and asks for {parsed.max_tokens} more",
                "invalid_request_error", "messages" if chat else "prompt", "context_length_exceeded")
        rid = request.headers.get("X-Request-Id") or f"sim-{next(self._ids)}"
        out = output_length(parsed, context_left, self.cfg.seed, self.cfg.default_max_tokens)
        words = parsed.prompt_words + [token_text(i).strip() for i in range(out)]
        req = SimRequest(rid, parsed.prompt_tokens, out, arrival, block_hashes=block_hashes(words))
        self._remember(req)
        renderer = ChunkRenderer(chat, f"{'chatcmpl' if chat else 'cmpl'}-{rid}", self.cfg.name, int(time.time()))
        if parsed.stream:
            return await self._stream(request, req, parsed, renderer)
        return await self._unary(req, parsed, chat)

    def _remember(self, req: SimRequest) -> None:
        self.ground_truth[req.request_id] = req
        while len(self.ground_truth) > _GROUND_TRUTH_KEEP:
            self.ground_truth.popitem(last=False)

    async def _drive(self, req: SimRequest, emit: Emit) -> None:
        """Run `req` through the engine, calling `emit(first, count)` as its tokens are released."""
        wake = asyncio.Event()
        req.on_token = lambda _: wake.set()
        self.driver.submit(req)
        seen = 0
        try:
            while not req.finished:
                await wake.wait()
                wake.clear()
                new = len(req.token_ns) - seen
                if new:
                    await emit(seen, new)
                    seen += new
            self.metrics.observe_finished(req)
        finally:
            if not req.finished:  # the client left: free its slot and blocks now
                self.driver.abort(req)

    async def _stream(self, request: web.Request, req: SimRequest, parsed: ParsedRequest,
                      renderer: ChunkRenderer) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Request-Id": req.request_id})
        await resp.prepare(request)
        if renderer.chat:
            await resp.write(renderer.role())

        async def emit(first: int, count: int) -> None:
            frames = renderer.tokens(first, count)
            if req.finished:
                frames += renderer.finish(_finish_reason(req, parsed))
                if parsed.include_usage:
                    frames += renderer.usage(req.prompt_tokens, len(req.token_ns))
                frames += b"data: [DONE]\n\n"
            await resp.write(frames)

        with contextlib.suppress(ConnectionResetError):
            await self._drive(req, emit)
        return resp

    async def _unary(self, req: SimRequest, parsed: ParsedRequest, chat: bool) -> web.Response:
        async def emit(first: int, count: int) -> None:
            return None

        await self._drive(req, emit)
        text = "".join(token_text(i) for i in range(len(req.token_ns)))
        body = full_response(chat, f"{'chatcmpl' if chat else 'cmpl'}-{req.request_id}", self.cfg.name,
                             int(time.time()), text, _finish_reason(req, parsed), req.prompt_tokens,
                             len(req.token_ns))
        return web.json_response(body, headers={"X-Request-Id": req.request_id})


def _finish_reason(req: SimRequest, parsed: ParsedRequest) -> str:
    return "length" if req.output_tokens == parsed.max_tokens else "stop"


async def serve(cfg: SimConfig, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Start the simulator; returns the runner and its base URL (port 0 picks a free port)."""
    runner = web.AppRunner(SimServer(cfg).app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, f"http://{host}:{bound}/v1"
