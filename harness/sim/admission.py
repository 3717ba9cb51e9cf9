"""Who and what the simulator's endpoints take, each refusal worded as vLLM words it: the time (still
starting), the caller (its key, the headers the gate wants), the body (JSON, an object), the request (its
model, its context, room in the queue)."""

from __future__ import annotations

from aiohttp import web

from harness.clock import Clock
from harness.config.simulator import SimulatorConfig
from harness.sim.build import context_problem
from harness.sim.gate import Gate
from harness.sim.openai_shapes import Json, error_response
from harness.sim.realtime import Driver
from harness.sim.requests import ParsedRequest


class Admission:
    def __init__(self, cfg: SimulatorConfig, api_key: str | None, gate: Gate, clock: Clock, ready_ns: int,
                 driver: Driver, max_model_len: int) -> None:
        self.cfg, self._api_key, self._gate, self._clock = cfg, api_key, gate, clock
        self._ready_ns, self._driver, self.max_model_len = ready_ns, driver, max_model_len

    def starting(self) -> web.Response | None:
        if self._clock.now_ns() < self._ready_ns:
            return error_response(503, "the server is starting", "server_error", headers={"Retry-After": "1"})
        return None

    def authorised(self, request: web.Request) -> bool:
        """The key as `Authorization: Bearer KEY`, or in `x-api-key` as Anthropic's clients send it."""
        key = self._api_key
        return ((key is None or request.headers.get("Authorization") == f"Bearer {key}"
                 or request.headers.get("x-api-key") == key) and self._gate.admits(request.headers))

    def turned_away(self, request: web.Request) -> web.Response | None:
        """Not now (starting) or not this caller (no key, a header the gate wants missing)."""
        if (starting := self.starting()) is not None:
            return starting
        return None if self.authorised(request) else unauthorised()

    async def intake(self, request: web.Request) -> tuple[int, Json] | web.Response:
        """A request's arrival (stamped as its bytes came in) and its JSON body; or why it is turned away."""
        arrival = getattr(request.protocol, "received_ns", 0) or self._clock.now_ns()
        if (away := self.turned_away(request)) is not None:
            return away
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "invalid_request_error")
        self._gate.note(body)
        return arrival, body

    def unknown_model(self, model: object) -> web.Response | None:
        if model == self.cfg.name:
            return None
        return error_response(404, f"the model '{str(model)[:80]}' does not exist", "not_found_error", "model",
                              "model_not_found")

    def refusal(self, parsed: ParsedRequest, param: str) -> web.Response | None:
        """A completion the server will not start: another model, past the context, the queue full."""
        if (unknown := self.unknown_model(parsed.model)) is not None:
            return unknown
        if (too_long := context_problem(self.max_model_len, parsed)) is not None:
            return error_response(400, too_long, "invalid_request_error", param, "context_length_exceeded")
        if self.cfg.max_waiting is not None and self._driver.snapshot().waiting >= self.cfg.max_waiting:
            return error_response(429, "too many requests waiting", "rate_limit_error",
                                  headers={"Retry-After": "1"})
        return None


def unauthorised() -> web.Response:
    return error_response(401, "invalid or missing API key", "authentication_error", code="invalid_api_key")
