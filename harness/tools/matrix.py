"""`harness predict --accelerators`: one scenario on each accelerator in virtual time, and which to choose.

Each accelerator gets the scenario's simulator section with that device (its batch defaults, unless the
scenario set others; the smallest tensor parallelism that holds the model: a property of the choice, not of
the scenario), runs every phase through `predict`, and is compared per phase on output tokens/s, TTFT p99,
ITL p50, goodput share and, with a price per device-hour, the cost of a million output tokens: for an
interactive phase those that met the SLOs, for a batch phase all of them (a batch job is judged by its
throughput, as training is). With `capacity`, the first open-loop phase is also searched for the highest
rate still meeting the SLOs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from harness.config.load import BatchLoad
from harness.config.scenario import SLO, Scenario
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.formats import WEIGHTS
from harness.errors import ScenarioError
from harness.run.simulator import check_fits
from harness.stats.schema import PhaseSummary
from harness.stats.schema.matrix import Choice, FoundCapacity, Matrix, MatrixColumn, MatrixRow, Ranking
from harness.stats.schema.sweeps import KNEE_GOODPUT
from harness.tools.predict import predict_async
from harness.tools.search import search
from harness.voice import QUIET, Voice

CAPACITY = {"goodput": 0.95, "low": 0.5, "high": 64.0, "duration_s": 20.0, "steps": 6, "repeats": 2}


def split_column(name: str) -> tuple[str, str | None]:
    """A column's device and weights' format: `h100-sxm:fp8` (None: the scenario's format)."""
    device, _, weights = name.partition(":")
    return device, weights or None


def on_accelerator(scenario: Scenario, accelerator: str, slo: SLO) -> Scenario | None:
    """The scenario on `accelerator` (`device` or `device:format`), or None when no tensor parallelism (number
    of devices) up to 8 holds its model as vLLM would start it: its weights, and a KV cache that holds one
    request of its max_model_len."""
    sim = scenario.simulator
    data = sim.model_dump(mode="json")
    if (sim.max_num_seqs, sim.max_num_batched_tokens) == catalogue().devices[sim.accelerator].batch_defaults():
        del data["max_num_seqs"], data["max_num_batched_tokens"]  # the device's defaults follow the device
    accelerator, weights = split_column(accelerator)
    if weights is not None:
        data["weights"] = weights
    for tp in catalogue().devices[accelerator].device_counts():
        cfg = SimulatorConfig.model_validate({**data, "accelerator": accelerator, "tp": tp})
        try:
            check_fits(cfg)
        except ScenarioError:
            continue
        return scenario.changed(simulator=cfg, slo=slo)
    return None


def needs(cfg: SimulatorConfig) -> str | None:
    """The scenario's own setting this configuration fits only with (vLLM's defaults would refuse it), or
    None."""
    if cfg.max_model_len is None and cfg.gpu_memory_utilization <= 0.9:
        return None
    default = cfg.changed(max_model_len=None, gpu_memory_utilization=0.9)
    try:
        check_fits(default)
    except ScenarioError:
        set_ = [f"max_model_len {cfg.max_model_len:,}" if cfg.max_model_len is not None else "",
                f"gpu_memory_utilization {cfg.gpu_memory_utilization:g}" if cfg.gpu_memory_utilization > 0.9 else ""]
        return ", ".join(s for s in set_ if s)
    return None


def device_label(accelerator: str) -> str:
    """What one device of `accelerator` is: a GPU, or a system of chips (an SRAM preset)."""
    return catalogue().devices[accelerator].unit


def _phase_row(phase: PhaseSummary, kind: str, price: float | None, tp: int) -> MatrixRow:
    tokens_per_s = phase.throughput.output_tokens_per_s
    share = phase.goodput.fraction
    good_tokens_per_s = tokens_per_s if kind == "batch" else tokens_per_s * share
    stress = phase.stress
    return {
        "output_tokens_per_s": tokens_per_s, "ttft_p99_ms": phase.latency_ms.ttft.p99,
        "itl_p50_ms": phase.latency_ms.itl.p50, "goodput_share": share,
        "good_tokens_per_s": good_tokens_per_s,
        "cost_per_m_tokens": None if price is None or good_tokens_per_s <= 0
        else price * tp / 3600 / good_tokens_per_s * 1e6,
        "memory_bound_share": None if stress is None else stress.memory_bound_share,
        "mbu": None if stress is None else stress.mbu, "mfu": None if stress is None else stress.mfu,
        "binding": None if stress is None else stress.binding,
    }


async def _capacity(scenario: Scenario, slo: SLO) -> FoundCapacity | None:
    """The highest Poisson rate of the first open-loop phase whose goodput meets the SLOs."""
    index = next((i for i, p in enumerate(scenario.phases) if not isinstance(p.load, BatchLoad)), None)
    if index is None or not slo.model_dump(exclude_none=True):
        return None
    one = scenario.changed(phases=[scenario.phases[index]])
    c = CAPACITY
    found = await search(one, predict_async, slo, c["goodput"], c["low"], c["high"], c["duration_s"],
                         int(c["steps"]), int(c["repeats"]))
    return {"phase": scenario.phases[index].name, "rps": found.capacity_rps,
            "interval_rps": None if found.interval_rps is None else list(found.interval_rps)}


async def accelerator_matrix(scenario: Scenario, accelerators: Sequence[str], prices: Mapping[str, float],
                             slo: SLO, capacity: bool = False, voice: Voice = QUIET) -> Matrix:
    """Per accelerator: the TP it needs and each phase's figures; then the best choice per phase. `voice` says
    which accelerator is being predicted (a capacity search on each takes a while)."""
    unknown = [a for a in [*(split_column(c)[0] for c in accelerators), *prices] if a not in catalogue().devices]
    if unknown:
        raise ScenarioError(f"--accelerators: unknown accelerator {unknown[0]!r}; known: "
                            f"{', '.join(sorted(catalogue().devices))}")
    formats = [(c, w) for c in accelerators if (w := split_column(c)[1]) is not None and w not in WEIGHTS]
    if formats:
        raise ScenarioError(f"--accelerators: {formats[0][0]!r}: unknown weight format {formats[0][1]!r}; known: "
                            f"{', '.join(WEIGHTS)}")
    kinds: dict[str, Literal["batch", "interactive"]] = {
        p.name: "batch" if isinstance(p.load, BatchLoad) else "interactive" for p in scenario.phases}
    columns: list[MatrixColumn] = []
    for k, name in enumerate(accelerators, 1):
        voice.say(f"predicting {k}/{len(accelerators)}: {name}{' and its capacity' if capacity else ''}…")
        moved = on_accelerator(scenario, name, slo)
        if moved is None:
            columns.append({"accelerator": name, "fits": False})
            continue
        summary = await predict_async(moved)
        tp, price = moved.simulator.tp, prices.get(split_column(name)[0])
        phases = {p.name: _phase_row(p, kinds[p.name], price, tp) for p in summary.phases}
        column: MatrixColumn = {"accelerator": name, "fits": True, "tp": tp, "price_per_hour": price,
                                "device": device_label(split_column(name)[0]), "needs": needs(moved.simulator),
                                "phases": phases}
        if capacity:
            column["capacity"] = await _capacity(moved, slo)
        columns.append(column)
    return {"scenario": scenario.name, "slo": slo.model_dump(exclude_none=True), "phase_kinds": kinds,
            "columns": columns, "best": best_choices(columns, kinds)}


def best_choices(columns: Sequence[MatrixColumn], kinds: Mapping[str, str]) -> dict[str, Choice]:
    """Per phase, the accelerator to choose and the one after it (None: no accelerator met an interactive
    phase's SLOs for 95% of its requests, the only ones an interactive phase is ranked among). With prices:
    the cheapest million output tokens (among the priced). Without: for a batch phase the most output
    tokens/s; for an interactive one the highest searched capacity when there is one, else the lowest TTFT p99
    (at a fixed offered rate every device that keeps up delivers the same tokens/s)."""
    best: dict[str, Choice] = {}
    for phase, kind in kinds.items():
        rows = [(c, c["phases"][phase]) for c in columns if c["fits"] and phase in c["phases"]]
        # An interactive phase is served only where the SLOs hold (for 95% of its requests, as `search` asks).
        rows = [(c, r) for c, r in rows if r["good_tokens_per_s"] > 0
                and (kind == "batch" or r["goodput_share"] >= KNEE_GOODPUT)]
        by, key = _ranking(rows, kind)
        if by is None:
            best[phase] = {"accelerator": None, "by": None, "runner_up": None}
            continue
        ranked = sorted(rows, key=key)
        unpriced: list[str] = []
        if by == "cost":  # the unpriced cannot be ranked by cost: named beside the choice, never dropped silently
            unpriced = [c["accelerator"] for c, r in ranked if r["cost_per_m_tokens"] is None]
            ranked = [cr for cr in ranked if cr[1]["cost_per_m_tokens"] is not None]
        choice: Choice = {"accelerator": ranked[0][0]["accelerator"], "by": by,
                          "runner_up": ranked[1][0]["accelerator"] if len(ranked) > 1 else None}
        if unpriced:
            choice["unpriced"] = unpriced
        best[phase] = choice
    return best


Ranked = tuple[MatrixColumn, MatrixRow]


def _ranking(rows: Sequence[Ranked], kind: str) -> tuple[Ranking | None, Callable[[Ranked], float]]:
    """What the phase's accelerators are ranked by, and the sort key (best first)."""
    if not rows:
        return None, lambda _: 0.0
    if any(r["cost_per_m_tokens"] is not None for _, r in rows):
        return "cost", lambda cr: _or_last(cr[1]["cost_per_m_tokens"])
    if kind == "batch":
        return "tokens/s", lambda cr: -cr[1]["good_tokens_per_s"]
    if all(_rps(c) is not None for c, _ in rows):
        return "capacity", lambda cr: -_or_last(_rps(cr[0]))
    return "TTFT p99", lambda cr: _or_last(cr[1]["ttft_p99_ms"])


def _rps(column: MatrixColumn) -> float | None:
    found = column.get("capacity")
    return None if found is None else found["rps"]


def _or_last(value: float | None) -> float:
    return 1e300 if value is None else value
