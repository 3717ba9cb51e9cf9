"""How the simulator listens: aiohttp's handler with each request's arrival stamped as its bytes come in, a
backlog deep enough for a thousand connections at once, port 0 for a free one."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiohttp import web

from harness.config.simulator import SimulatorConfig
from harness.sim.gate import Gate
from harness.sim.realtime import StepGate
from harness.sim.server import INTAKE_NS, SimServer


class _StampingHandler(web.RequestHandler):
    """aiohttp's connection handler, stamping when each request's bytes arrive.

    The handler coroutine of a request runs a loop iteration or more after its bytes came in;
    in between, the simulator may be streaming thousands of tokens. Ground truth needs the
    arrival itself, so it is taken here, in the protocol callback.
    """

    received_ns = 0
    # A request's bytes that came in as a step fell due wait until it has ended: parsing them (aiohttp's HTTP,
    # then the handler's JSON and prompt) would make the step late; their arrival is stamped all the same.
    step_gate: StepGate | None = None
    _held: list[bytes] | None = None

    def data_received(self, data: bytes) -> None:
        self.received_ns = time.monotonic_ns()
        if self._held is not None:  # behind bytes already held: in order
            self._held.append(data)
        elif self.step_gate is not None and self.step_gate.near(INTAKE_NS):
            self._held = [data]
            self.step_gate.after(self._release)
        else:
            super().data_received(data)

    def _release(self) -> None:
        held, self._held = self._held or [], None
        if self.transport is None:  # the client left meanwhile
            return
        for data in held:
            super().data_received(data)


@dataclass(slots=True)
class RunningSim:
    runner: web.AppRunner
    listener: asyncio.Server
    server: SimServer

    async def cleanup(self) -> None:
        self.listener.close()
        await self.runner.cleanup()


async def serve(cfg: SimulatorConfig, host: str, port: int, api_key: str | None = None, gate: Gate | None = None,
                live_lateness: bool = True) -> tuple[RunningSim, str]:
    """Start the simulator; returns its handle and base URL (port 0 picks a free port). `gate`: headers it
    requires, the body fields it logs; `live_lateness`: say the first late step as it happens (else only the
    sum, when it stops)."""
    sim = SimServer(cfg, api_key, gate, live_lateness)
    runner = web.AppRunner(sim.app(), access_log=None)
    await runner.setup()
    manager = runner.server
    assert manager is not None
    loop = asyncio.get_running_loop()
    # access_log=None turns access logging off, as AppRunner(access_log=None) does (aiohttp types it as
    # Logger). asyncio's backlog of 100 overflows when hundreds of connections open at once: each refused SYN
    # costs 1 s.
    def protocol() -> _StampingHandler:
        handler = _StampingHandler(manager, loop=loop, access_log=None)  # type: ignore[arg-type]
        handler.step_gate = sim.driver.gate
        return handler

    listener = await loop.create_server(protocol, host, port, backlog=4096)
    bound = listener.sockets[0].getsockname()[1]
    return RunningSim(runner, listener, sim), f"http://{host}:{bound}/v1"
