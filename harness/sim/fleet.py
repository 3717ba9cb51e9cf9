"""Several step engines behind one endpoint: replicas behind a router, and optionally a prefill pool whose
finished prompts move their KV over a link to the decode pool (docs/fleets.md).

A disaggregated request runs twice, as vLLM's proxy runs it: on a prefill server as a one-token request
whose blocks are held until its KV has left, then — the transfer's time later — on a decode server, which
finds the prompt's KV already there (all but the last token, whose logits it computes) and streams every
token the client sees. With `first_token: prefill` (DistServe, Splitwise) the prefill server's token is the
client's first and the decode server computes from it. Each engine keeps its own step loop on the shared clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from harness.clock import NS_PER_S, Clock, cancel_quietly
from harness.sim.engine import Engine, SimRequest, StepAccount
from harness.sim.realtime import DriverBase, LatenessObserver, Snapshot, StepDriver
from harness.sim.router import Picker

# (the request, its prefill's seconds) → seconds its KV adds on the way to the decode pool
Transfer = Callable[[SimRequest, float], float]


@dataclass(frozen=True, slots=True)
class Handoff:
    """How a prompt passes from the prefill pool to the decode pool."""

    transfer: Transfer
    first_from_prefill: bool = False  # the prefill server's token is the client's first (`first_token: prefill`)


@dataclass(frozen=True, slots=True)
class Servers:
    name: str  # "decode", "prefill" — what /metrics labels its servers with
    engines: Sequence[Engine]
    picker: Picker


class FleetDriver(DriverBase):
    def __init__(self, decode: Servers, prefill: Servers | None, handoff: Handoff, clock: Clock | None = None,
                 on_lateness: LatenessObserver | None = None,
                 settle: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(clock, on_lateness)
        self.decode, self.prefill, self._handoff = decode, prefill, handoff
        self._drivers = {pool.name: [StepDriver(e, self.clock, self._record_lateness, settle) for e in pool.engines]
                         for pool in (decode, prefill) if pool is not None}
        self._prefilling: dict[SimRequest, tuple[SimRequest, int]] = {}  # request → its prefill run, server
        self._moves: set[asyncio.Task[None]] = set()
        self.in_transfer = 0
        self.transfer_s = 0.0  # summed over every KV moved
        self.transfers = 0

    def submit(self, req: SimRequest) -> None:
        if self.prefill is None:
            self._to(self.decode, req)
            return
        ahead = prefill_run(req)
        server = self._to(self.prefill, ahead)
        self._prefilling[req] = (ahead, server)
        ahead.on_token = lambda done: self._prefilled(req, done, server)

    def _to(self, pool: Servers, req: SimRequest) -> int:
        server = pool.picker.pick(req, pool.engines)
        self._drivers[pool.name][server].submit(req)
        return server

    def _prefilled(self, req: SimRequest, ahead: SimRequest, server: int) -> None:
        if not ahead.finished:
            return
        if (seconds := handed_over(req, ahead, self._handoff)) is None:
            assert self.prefill is not None
            self.prefill.engines[server].release(ahead)
            self._prefilling.pop(req, None)
            return
        self.transfer_s += seconds
        self.transfers += 1
        self.in_transfer += 1
        task = asyncio.ensure_future(self._move(req, ahead, server, ahead.token_ns[0] + round(seconds * NS_PER_S)))
        self._moves.add(task)
        task.add_done_callback(self._moves.discard)

    async def _move(self, req: SimRequest, ahead: SimRequest, server: int, landed_ns: int) -> None:
        await self.clock.sleep_until(landed_ns)
        self.in_transfer -= 1
        assert self.prefill is not None
        self.prefill.engines[server].release(ahead)
        self._prefilling.pop(req, None)
        if req.aborted:
            return
        req.external = req.prompt_tokens
        self._to(self.decode, req)

    def abort(self, req: SimRequest) -> None:
        if (prefilling := self._prefilling.get(req)) is not None:
            ahead, server = prefilling
            req.aborted = True  # a KV on its way is dropped when it lands
            if not ahead.finished:
                assert self.prefill is not None
                self.prefill.engines[server].abort(ahead)
                del self._prefilling[req]
            return
        for engine in self.decode.engines:
            if req in engine.running or req in engine.waiting:
                engine.abort(req)
                return

    def _record_lateness(self, late_ns: int) -> None:
        super()._record_lateness(late_ns)
        self.resyncs = sum(d.resyncs for drivers in self._drivers.values() for d in drivers)

    async def run(self) -> None:
        try:
            await asyncio.gather(*(d.run() for drivers in self._drivers.values() for d in drivers))
        finally:
            for task in list(self._moves):
                await cancel_quietly(task)

    def servers(self) -> list[tuple[str, Snapshot]]:
        """Each server's own figures, labelled as /metrics labels them (`decode-0`, `prefill-1`, …)."""
        return [(f"{name}-{i}", d.snapshot()) for name, drivers in self._drivers.items()
                for i, d in enumerate(drivers)]

    def snapshot(self) -> Snapshot:
        """The fleet as one server: every queue, the tokens it answered (the decode pool's), the prompts'
        lookups where prompts are computed, the devices' time and peaks summed."""
        every = [snap for _, snap in self.servers()]
        decoded = [d.snapshot() for d in self._drivers["decode"]]
        prompts = [d.snapshot() for d in self._drivers["prefill"]] if self.prefill is not None else decoded
        # the pools whose tokens the client saw: the prefill pool's too when it sends the first
        answered = [*decoded, *prompts] if self._handoff.first_from_prefill else decoded
        first = prompts if self._handoff.first_from_prefill else decoded
        return Snapshot(sum(s.running for s in every) + self.in_transfer, sum(s.waiting for s in every),
                        sum(s.kv_usage for s in every) / len(every), sum(s.preemptions for s in every),
                        sum(s.prefix_query_tokens for s in prompts), sum(s.prefix_hit_tokens for s in prompts),
                        sum(s.generation_tokens for s in answered), sum(s.prompt_tokens for s in first),
                        summed_account([s.stress for s in every if s.stress is not None]),
                        summed_peaks([s.peaks for s in every]))


def prefill_run(req: SimRequest) -> SimRequest:
    """`req` as a prefill server runs it: one token, sampled and discarded, its blocks held for the transfer."""
    return SimRequest(req.request_id, req.prompt_tokens, 1, req.arrival_ns, block_hashes=req.block_hashes,
                      hold_kv=True)


def handed_over(req: SimRequest, ahead: SimRequest, handoff: Handoff) -> float | None:
    """`req`'s prefill is done: its queue time and cache hits are the prefill server's; the seconds its KV takes
    to reach the decode pool — None when its first token was its last, nothing left to decode."""
    req.scheduled_ns, req.cached_tokens = ahead.scheduled_ns, ahead.cached_tokens
    if handoff.first_from_prefill and not req.aborted:
        req.generated, req.token_ns = 1, [ahead.token_ns[0]]
        req.finished = req.output_tokens <= 1
        if req.on_token is not None:
            req.on_token(req)
        if req.finished:
            return None
    start = ahead.scheduled_ns if ahead.scheduled_ns is not None else ahead.arrival_ns
    return handoff.transfer(req, (ahead.token_ns[0] - start) / NS_PER_S)


def summed_account(accounts: list[StepAccount]) -> StepAccount | None:
    if not accounts:
        return None
    total = StepAccount()
    for name in ("memory_bound_s", "compute_bound_s", "hbm_bytes", "flops", "memory_s", "compute_s", "link_s"):
        setattr(total, name, sum(getattr(a, name) for a in accounts))
    total.last_mbu = sum(a.last_mbu for a in accounts) / len(accounts)
    total.last_mfu = sum(a.last_mfu for a in accounts) / len(accounts)
    return total


def summed_peaks(peaks: list[tuple[float, float] | None]) -> tuple[float, float] | None:
    """All devices' peaks together: the fleet's utilisation is its bytes and FLOPs over what all could do."""
    if not peaks or any(p is None for p in peaks):
        return None
    return sum(p[0] for p in peaks if p), sum(p[1] for p in peaks if p)
