"""A scenario from `harness run` flags, for a first run without a YAML file: one phase (open loop at --rate,
closed loop at --concurrency), optionally followed by training-style batches (--batch). Saved with the run as
`scenario.yaml`, so it reruns as a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.config.scenario import Scenario, parse_scenario
from harness.errors import ScenarioError

_SHAPES = {"fixed": ("value",), "uniform": ("min", "max"), "normal": ("mean", "std"),
           "lognormal": ("median", "sigma")}


def length_spec(text: str) -> int | dict[str, Any]:
    """`512`, `fixed:512`, `uniform:128:2048`, `normal:1000:300`, `lognormal:512:0.5` → a workload length.
    A ValueError says which forms there are."""
    name, *numbers = text.strip().split(":")
    if not numbers and name.isdigit():
        return int(name)
    params = _SHAPES.get(name)
    if params is None or len(numbers) != len(params):
        raise ValueError(f"{text!r}: use a number of tokens or fixed:N, uniform:MIN:MAX, normal:MEAN:STD, "
                         "lognormal:MEDIAN:SIGMA")
    try:
        values = [float(n) for n in numbers]
    except ValueError:
        raise ValueError(f"{text!r}: {':'.join(numbers)} are not numbers") from None
    return {"dist": name, **dict(zip(params, values, strict=True))}


@dataclass(frozen=True, slots=True)
class QuickRun:
    rate: float | None = None
    concurrency: int | None = None
    batch: int | None = None
    requests: int | None = None
    duration_s: float | None = None
    prompt_tokens: str = "256"
    output_tokens: str = "128"
    seed: int = 0
    slo: dict[str, float] | None = None
    api: str | None = None
    max_concurrency: int | None = None  # with a rate: at most this many in flight (vLLM bench serve's flag)
    batches: int = 2
    warmup_s: float | None = None
    # Peers' flags, as harness.cli.peer_flags maps them:
    arrivals: str = "poisson"  # poisson | gamma | constant, at `rate`
    cv: float | None = None  # gamma: the gaps' coefficient of variation
    sweep_rates: tuple[float, ...] | None = None  # the rate phase at each of these rates
    dataset: tuple[str, str] | None = None  # (sharegpt | burstgpt, its file)
    pack_batches: bool = False  # a batch is one request of `batch` texts (the API's offline shape: embeddings)

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.rate, self.concurrency, self.batch))


DEFAULT_REQUESTS = 100


def _workload(q: QuickRun) -> dict[str, object]:
    """The lengths the flags give, or a dataset's: ShareGPT's turns, or BurstGPT's rows' lengths."""
    lengths: dict[str, object] = {"prompt_tokens": length_spec(q.prompt_tokens),
                               "output_tokens": length_spec(q.output_tokens)}
    if q.dataset is None:
        return lengths
    kind, file = q.dataset
    if kind == "sharegpt":
        return {**lengths, "dataset": {"type": "sharegpt", "file": file, "output_tokens": "reply"}}
    return {"prompt_tokens": {"dist": "empirical", "file": file, "column": "input"},
            "output_tokens": {"dist": "empirical", "file": file, "column": "output"}}


def quick_scenario(q: QuickRun) -> Scenario:
    """The scenario the flags describe; a bad combination is a ScenarioError naming the flags."""
    bound: dict[str, Any] = {}
    if q.requests is not None:
        bound["requests"] = q.requests
    if q.duration_s is not None:
        bound["duration_s"] = q.duration_s
    phases: list[dict[str, Any]] = []
    warm = {} if q.warmup_s is None else {"warmup_s": q.warmup_s}
    if q.max_concurrency is not None and q.rate is None:
        raise ScenarioError("--max-concurrency caps the requests in flight of a --rate run; for N users in a "
                            "closed loop give --concurrency N")
    if q.rate is not None:
        cap = {} if q.max_concurrency is None else {"max_in_flight": q.max_concurrency}
        shape = {"type": q.arrivals, "rate": q.rate, **({"cv": q.cv} if q.cv is not None else {})}
        swept = {"sweep": {"rate": list(q.sweep_rates)}} if q.sweep_rates else {}
        phases.append({"name": "interactive", "load": {**shape, **(bound or {"requests": DEFAULT_REQUESTS})}, **cap,
                       **warm, **swept})
    if q.concurrency is not None:
        phases.append({"name": "users", "load": {"type": "concurrency", "concurrency": q.concurrency,
                                                 **(bound or {"requests": DEFAULT_REQUESTS})}, **warm})
    if q.batch is not None:
        packed = {"pack": "inputs"} if q.pack_batches else {}
        load = {"type": "batch", "size": q.batch, "batches": q.batches, **packed}
        phases.append({"name": "training-batch", "load": load})
    data: dict[str, Any] = {
        "name": "quick", "seed": q.seed, "description": "built from harness run flags",
        "workload": _workload(q), "slo": q.slo or {}, "phases": phases,
    }
    if q.api is not None:
        data["endpoint"] = {"api": q.api}
    return parse_scenario(data, "flags")
