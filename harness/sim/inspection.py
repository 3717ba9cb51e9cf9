"""The simulator's own routes under /sim/, for tests and benchmarks: what it did with each request (ground
truth), its engine's state, and the faults it injects (read, and set by a caller holding the key)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from harness.config.simulator import FaultConfig
from harness.sim.faults import FaultInjector
from harness.sim.openai_shapes import error_response
from harness.sim.realtime import Driver
from harness.sim.truth import GroundTruth


class Inspection:
    def __init__(self, driver: Driver, faults: FaultInjector, truth: GroundTruth,
                 authorised: Callable[[web.Request], bool], refused: Callable[[], web.Response]) -> None:
        self.driver, self.faults, self.truth = driver, faults, truth
        self._authorised, self._refused = authorised, refused

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/sim/requests/{request_id}", self.request_truth), web.post("/sim/truth", self.many_truths),
                web.get("/sim/status", self.status), web.get("/sim/faults", self.get_faults),
                web.post("/sim/faults", self.set_faults)]

    async def status(self, _: web.Request) -> web.Response:
        lateness = sorted(self.driver.lateness_ns)
        p99 = lateness[int(0.99 * (len(lateness) - 1))] if lateness else None
        snap = self.driver.snapshot()
        return web.json_response({
            "running": snap.running, "waiting": snap.waiting, "kv_usage": snap.kv_usage,
            "preemptions": snap.preemptions, "steps": self.driver.steps, "step_lateness_p99_ns": p99,
            "resyncs": self.driver.resyncs,
        })

    async def get_faults(self, _: web.Request) -> web.Response:
        return web.json_response(self.faults.config.to_json())

    async def set_faults(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return self._refused()
        try:
            self.faults.configure(FaultConfig.from_json(await request.json(), self.faults.config))
        except (ValueError, TypeError) as exc:
            return error_response(400, str(exc), "invalid_request_error")
        return web.json_response(self.faults.config.to_json())

    async def request_truth(self, request: web.Request) -> web.Response:
        truth = self.truth.get(request.match_info["request_id"])
        if truth is None:
            return error_response(404, "unknown request id", "not_found_error")
        return web.json_response(truth)

    async def many_truths(self, request: web.Request) -> web.Response:
        """Ground truth of many requests at once: {"ids": [...]} → {"requests": [...]} (unknown ids left
        out)."""
        try:
            ids = (await request.json())["ids"]
            found = [self.truth.get(str(i)) for i in ids]
        except (ValueError, KeyError, TypeError):
            return error_response(400, "body must be {\"ids\": [...]}", "invalid_request_error", "ids")
        return web.json_response({"requests": [r for r in found if r is not None]})
