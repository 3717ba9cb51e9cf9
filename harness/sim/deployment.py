"""The driver a `SimulatorConfig` describes: one server's step engine, or a fleet of them (replicas behind a
router, a prefill pool before the decode pool), and the rules the whole deployment follows (its context,
why it would not start).

Shared by the server and `harness predict`, so both serve and price the same deployment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from harness.clock import Clock
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.links import LINKS, transfer_s
from harness.devices.step import kv_bytes
from harness.sim.build import build_engine, fit_problem, model_context, perf_model
from harness.sim.engine import SimRequest
from harness.sim.fleet import FleetDriver, Handoff, Servers
from harness.sim.realtime import LatenessObserver, StepDriver
from harness.sim.router import picker


def prefill_server(cfg: SimulatorConfig) -> SimulatorConfig | None:
    """One server of the prefill pool: the decode server's settings on its own accelerator and tp, with that
    accelerator's batch defaults unless the scenario set its own."""
    pool = cfg.prefill
    if pool is None:
        return None
    fields = {"accelerator": pool.accelerator, "tp": pool.tp, "replicas": 1, "prefill": None}
    defaults = catalogue().devices[cfg.accelerator].batch_defaults()
    if (cfg.max_num_seqs, cfg.max_num_batched_tokens) == defaults:
        seqs, tokens = catalogue().devices[pool.accelerator].batch_defaults()
        fields |= {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
    return cfg.changed(**fields)


def deployment_context(cfg: SimulatorConfig) -> int:
    """The longest context every server of the deployment accepts."""
    prefill = prefill_server(cfg)
    return min(model_context(cfg), model_context(prefill)) if prefill is not None else model_context(cfg)


def deployment_problem(cfg: SimulatorConfig) -> str | None:
    """Why the deployment would not start (a pool whose servers do not), or None."""
    prefill = prefill_server(cfg)
    if prefill is not None and (problem := fit_problem(prefill)) is not None:
        return f"the prefill pool: {problem}"
    problem = fit_problem(cfg)
    return problem if prefill is None or problem is None else f"the decode pool: {problem}"


def handoff(cfg: SimulatorConfig) -> Handoff:
    """A prompt's KV from a prefill server to a decode server (its bytes over min(tp) links at once), and which
    pool's token is its first."""
    prefill = cfg.prefill
    model = catalogue().models[cfg.model]
    per_token = model.kv_bytes_per_token(kv_bytes(cfg.kv_cache_dtype))
    lanes = min(model.kv_split(cfg.tp), model.kv_split(prefill.tp if prefill is not None else cfg.tp))
    link, layerwise = LINKS[cfg.kv_link], cfg.kv_transfer == "layerwise"

    def seconds(req: SimRequest, prefill_s: float) -> float:
        return transfer_s(req.prompt_tokens * per_token, link, lanes, layerwise, prefill_s, model.layers)

    return Handoff(seconds, cfg.first_token == "prefill")


def build_driver(cfg: SimulatorConfig, clock: Clock | None = None, on_lateness: LatenessObserver | None = None,
                 settle: Callable[[], Awaitable[None]] | None = None) -> StepDriver | FleetDriver:
    if not cfg.fleet:
        return StepDriver(build_engine(cfg), clock, on_lateness, settle)
    return FleetDriver(*pools(cfg), handoff(cfg), clock, on_lateness, settle)


def pools(cfg: SimulatorConfig) -> tuple[Servers, Servers | None]:
    """The decode pool (every server, without a prefill pool) and the prefill pool, fresh engines each."""
    prefill = prefill_server(cfg)
    first = _pool("prefill", prefill, cfg.prefill.replicas) if prefill is not None and cfg.prefill else None
    return _pool("decode", cfg, cfg.replicas), first


def _pool(name: str, server: SimulatorConfig, replicas: int) -> Servers:
    # each server its own step noise, as real servers' are their own
    engines = [build_engine(server.changed(seed=server.seed + i)) for i in range(replicas)]
    blocks = perf_model(server)[1] // 16
    return Servers(name, engines, picker(server.router, replicas, blocks))
