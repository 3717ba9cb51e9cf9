"""One trial of a deployment: the same seeded requests, Poisson at a rate, through the deployment's engines
in virtual time (sim/virtual_fleet.py); the share of requests within the SLOs and the latencies they had.

The requests are drawn once per search (`PlanRequests`) and rebuilt for each trial, so every deployment and
every rate sees the same prompts, answers and arrival order; only the spacing scales with the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.config.load import TraceLoad
from harness.config.scenario import Scenario
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.step import kv_bytes
from harness.sim.build import model_context
from harness.sim.deployment import handoff, pools
from harness.sim.engine import SimRequest
from harness.sim.fleet import Servers
from harness.sim.virtual_fleet import GiveUp, VirtualFleet
from harness.workload.lengths import draw
from harness.workload.plan import replay_trace


@dataclass(frozen=True, slots=True)
class PlanRequests:
    prompts: np.ndarray  # tokens, one a request: as many as the longest trial sends
    outputs: np.ndarray
    unit_offsets_s: np.ndarray  # Poisson arrivals at 1 request/s: divided by the rate of a trial
    fewest: int  # a trial sends at least this many (`--requests`)

    @property
    def mean_output(self) -> float:
        return float(self.outputs[:self.fewest].mean())

    @property
    def mean_prompt(self) -> float:
        return float(self.prompts[:self.fewest].mean())

    def count_at(self, rate: float, slos: Slos) -> int:
        """Requests a trial at `rate` sends: enough to reach its steady state and judge it — twice the requests
        in flight when each takes as long as the SLOs allow (rate × end-to-end) — and at least `fewest`; at most
        as many as were drawn."""
        longest = (slos.ttft_s or 1.0) + self.mean_output * (slos.tpot_s or 0.05)
        return int(min(len(self.prompts), max(self.fewest, 2 * rate * longest)))

    def at(self, rate: float, count: int | None = None) -> list[SimRequest]:
        """Fresh requests (an engine changes the ones it serves) arriving at `rate` a second: the first
        `count` (default `fewest`)."""
        n = self.fewest if count is None else count
        offsets = (self.unit_offsets_s[:n] / rate * 1e9).astype(np.int64)
        return [SimRequest(str(i), int(p), int(o), int(t))
                for i, (p, o, t) in enumerate(zip(self.prompts[:n], self.outputs[:n], offsets, strict=True))]


MOST_REQUESTS = 20_000  # drawn once a search; a trial that would need more is judged on these (said)


def plan_requests(scenario: Scenario, fewest: int, most: int = MOST_REQUESTS) -> PlanRequests:
    """`most` requests of the scenario's first phase (a trial sends `fewest` or more of them): a trace's rows'
    lengths (cycled), else the workload's lengths drawn with the scenario's seed; each cut to the model's context
    as the server would take it."""
    rng = np.random.default_rng(scenario.seed)
    count = max(fewest, most)
    load = scenario.phases[0].load
    if isinstance(load, TraceLoad) and load.file is not None:
        rows = replay_trace(load)[0].rows
        prompts = np.array([max(1, rows[i % len(rows)].input_tokens) for i in range(count)])
        outputs = np.array([max(1, rows[i % len(rows)].output_tokens) for i in range(count)])
    else:
        w = scenario.workload
        prompts = np.array([max(1, draw(w.prompt_tokens, rng)) for _ in range(count)])
        outputs = np.array([max(1, draw(w.output_tokens, rng)) for _ in range(count)])
    # as the server would take them: a prompt within the model's context, its answer in the room left
    context = model_context(scenario.simulator)
    prompts = np.minimum(prompts, context - 1)
    outputs = np.minimum(outputs, context - prompts)
    return PlanRequests(prompts, outputs, np.cumsum(rng.exponential(1.0, count)), fewest)


@dataclass(frozen=True, slots=True)
class Slos:
    ttft_s: float | None
    tpot_s: float | None
    attainment: float  # share of requests that must be within every SLO (DistServe's goodput: 90%)


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """Where one pool's device time went over a trial: the words of a plan's answer."""

    pool: str  # decode, prefill
    accelerator: str
    busy: float  # share of the trial its servers were stepping
    memory_bound: float  # share of that time whose memory reads outlasted the arithmetic
    mbu: float  # bytes read / (busy time × peak bandwidth)
    mfu: float  # FLOPs / (busy time × peak FLOP/s)


@dataclass(frozen=True, slots=True)
class Trial:
    rate: float
    passed: bool
    within: float | None  # share of requests within every SLO; None: the trial gave up early
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    pools: tuple[PoolLoad, ...] = ()
    kv_bytes_per_s: float = 0.0  # over the link, prefill to decode
    sent: int = 0  # requests the trial sent (more at higher rates: `PlanRequests.count_at`)


WARM_SHARE = 0.25  # the first quarter of a trial's requests fill the servers: served, not judged


def run_trial(cfg: SimulatorConfig, requests: PlanRequests, rate: float, slos: Slos, give_up: bool) -> Trial:
    """The deployment at `rate`; with `give_up`, stopped as soon as too many requests have missed for the
    trial to pass (its verdict is the same; its latencies are those of the requests served by then)."""
    reqs = requests.at(rate, requests.count_at(rate, slos))
    judged = reqs[int(WARM_SHARE * len(reqs)):]
    allowed = int((1 - slos.attainment) * len(judged))
    missed = [0]

    def judge(req: SimRequest) -> None:
        times = req.token_ns
        if len(times) == 1:
            late = slos.ttft_s is not None and times[0] - req.arrival_ns > slos.ttft_s * 1e9
        elif req.finished and req.finish_reason != "late":
            late = slos.tpot_s is not None and (times[-1] - times[0]) / (len(times) - 1) > slos.tpot_s * 1e9
        else:
            return
        if late:
            missed[0] += 1
            req.finish_reason = "late"  # counted once, whichever SLO it missed first
            if give_up and missed[0] > allowed:
                raise GiveUp

    for req in judged:
        req.on_token = judge
    # Every prompt its own (a plan prices capacity, not a cache): no prefix to find, so none is kept — the
    # prefix cache's bookkeeping was most of a trial's time, and with nothing shared it changes no step.
    unshared = cfg.changed(prefix_caching=False)
    fleet = VirtualFleet(*pools(unshared), handoff(unshared))
    finished = fleet.run(reqs)
    passed = finished and all(r.finished for r in judged) and missed[0] <= allowed
    within = 1 - missed[0] / len(judged) if finished else None
    ttfts = [r.token_ns[0] - r.arrival_ns for r in judged if r.token_ns]
    tpots = [(r.token_ns[-1] - r.token_ns[0]) / (len(r.token_ns) - 1) for r in judged
             if r.finished and len(r.token_ns) > 1]
    seconds = max(fleet.now / 1e9, 1e-9)
    moved = 0.0
    if fleet.prefill is not None:
        per_token = catalogue().models[cfg.model].kv_bytes_per_token(kv_bytes(cfg.kv_cache_dtype))
        moved = sum(r.prompt_tokens for r in reqs if r.external) * per_token / seconds
    loads = tuple(_load(s, cfg, seconds) for s in (fleet.prefill, fleet.decode) if s is not None)
    return Trial(rate, passed, within, _p99(ttfts), _p99(tpots), loads, moved, len(reqs))


def _load(servers: Servers, cfg: SimulatorConfig, seconds: float) -> PoolLoad:
    engines = servers.engines
    accelerator = (cfg.prefill.accelerator if servers.name == "prefill" and cfg.prefill else cfg.accelerator)
    busy = sum(e.stress.memory_bound_s + e.stress.compute_bound_s for e in engines)
    peaks = engines[0].peaks or (0.0, 0.0)
    hbm, flops = sum(e.stress.hbm_bytes for e in engines), sum(e.stress.flops for e in engines)
    return PoolLoad(servers.name, accelerator, busy / (seconds * len(engines)),
                    sum(e.stress.memory_bound_s for e in engines) / busy if busy else 0.0,
                    hbm / (busy * peaks[0]) if busy and peaks[0] else 0.0,
                    flops / (busy * peaks[1]) if busy and peaks[1] else 0.0)


def _p99(values_ns: Sequence[float]) -> float | None:
    return float(np.percentile(values_ns, 99)) / 1e9 if values_ns else None
