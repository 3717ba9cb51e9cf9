"""How the simulator listens: aiohttp's handler with each request's arrival stamped as its bytes come in, a
backlog deep enough for a thousand connections at once, port 0 for a free one."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiohttp import web

from harness.config.simulator import SimulatorConfig
from harness.sim.gate import Gate
from harness.sim.server import SimServer


class _StampingHandler(web.RequestHandler):
    """aiohttp's connection handler, stamping when each request's bytes arrive.

    The handler coroutine of a request runs a loop iteration or more after its bytes came in;
    in between, the simulator may be streaming thousands of tokens. Ground truth needs the
    arrival itself, so it is taken here, in the protocol callback.
    """

    received_ns = 0

    def data_received(self, data: bytes) -> None:
        self.received_ns = time.monotonic_ns()
        super().data_received(data)


@dataclass(slots=True)
class RunningSim:
    runner: web.AppRunner
    listener: asyncio.Server

    async def cleanup(self) -> None:
        self.listener.close()
        await self.runner.cleanup()


async def serve(cfg: SimulatorConfig, host: str, port: int, api_key: str | None = None, gate: Gate | None = None,
                live_lateness: bool = True) -> tuple[RunningSim, str]:
    """Start the simulator; returns its handle and base URL (port 0 picks a free port). `gate`: headers it
    requires, the body fields it logs; `live_lateness`: say the first late step as it happens (else only the
    sum, when it stops)."""
    runner = web.AppRunner(SimServer(cfg, api_key, gate, live_lateness).app(), access_log=None)
    await runner.setup()
    manager = runner.server
    assert manager is not None
    loop = asyncio.get_running_loop()
    # access_log=None turns access logging off, as AppRunner(access_log=None) does (aiohttp types it as
    # Logger). asyncio's backlog of 100 overflows when hundreds of connections open at once: each refused SYN
    # costs 1 s.
    listener = await loop.create_server(
        lambda: _StampingHandler(manager, loop=loop, access_log=None), host, port,  # type: ignore[arg-type]
        backlog=4096)
    bound = listener.sockets[0].getsockname()[1]
    return RunningSim(runner, listener), f"http://{host}:{bound}/v1"
