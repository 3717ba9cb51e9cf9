"""Load models and phases of a scenario: when requests are sent (open, closed loop, fixed batch, sweeps)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.config.base import PositiveFloat, PositiveInt, PositiveSeconds, Rate, Requests, Seconds, Strict
from harness.config.thresholds import Thresholds
from harness.limits import PLANNED_REQUESTS, SPAN_S


def _plannable(rate: float, duration_s: float | None, requests: int | None) -> None:
    """A phase bounded by its duration alone plans rate × duration arrivals: under the ceiling too; one
    bounded by its requests alone spans requests / rate seconds: under the longest span a phase may plan."""
    if requests is None and duration_s is not None and rate * duration_s > PLANNED_REQUESTS:
        raise ValueError(f"rate × duration_s is {rate * duration_s:.3g} arrivals, over the {PLANNED_REQUESTS:,} a "
                         "phase may plan: split it into phases")
    if duration_s is None and requests is not None and requests / rate > SPAN_S:
        raise ValueError(f"requests / rate is {requests / rate:.3g} s of arrivals, over the {SPAN_S // 86_400} "
                         "days a phase may span: a higher rate, or duration_s to end it")


class _OpenLoop(Strict):
    rate: Rate = Field(description="mean arrivals per second")
    requests: Requests | None = None
    duration_s: PositiveSeconds | None = None

    @model_validator(mode="after")
    def _bounded(self) -> _OpenLoop:
        if self.requests is None and self.duration_s is None:
            raise ValueError("give 'requests' or 'duration_s' (or both) to bound the phase")
        _plannable(self.rate, self.duration_s, self.requests)
        return self


class PoissonLoad(_OpenLoop):
    type: Literal["poisson"]


class GammaLoad(_OpenLoop):
    type: Literal["gamma"]
    cv: PositiveFloat = Field(description="coefficient of variation of the gaps; 1 is Poisson")


class ConstantLoad(_OpenLoop):
    type: Literal["constant"]


class RampLoad(Strict):
    """Open loop whose rate moves linearly from `start_rate` to `end_rate` over `duration_s`."""

    type: Literal["ramp"]
    start_rate: Rate
    end_rate: Rate
    duration_s: PositiveSeconds
    process: Literal["poisson", "constant"] = "poisson"
    requests: Requests | None = None

    @model_validator(mode="after")
    def _plan_fits(self) -> RampLoad:
        _plannable(max(self.start_rate, self.end_rate), self.duration_s, self.requests)
        return self


class TraceColumns(Strict):
    time: str = "timestamp"
    input: str = "input_tokens"
    output: str = "output_tokens"
    time_unit: Literal["s", "ms"] = "s"
    session: str | None = None


class TraceLoad(Strict):
    """Open loop at recorded arrival times: a trace file, or a list of seconds.

    From a file, each request also takes its input and output lengths (and, for Mooncake, its
    prefix blocks) from its row. `time_scale` 10 replays ten times faster; `target_rate` instead
    stretches the whole trace to that mean rate, keeping its burst shape.
    """

    type: Literal["trace"]
    timestamps: Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=1)] | None = None
    file: str | None = Field(None, description="path, relative to the scenario file")
    format: Literal["azure", "mooncake", "burstgpt", "generic"] | None = Field(None, description="default: sniffed")
    model: str | None = Field(None, description="BurstGPT: keep only this model's rows")
    columns: TraceColumns = TraceColumns()
    skip_bad_rows: bool = False
    start_s: Seconds = 0.0
    end_s: PositiveSeconds | None = None
    time_scale: PositiveFloat = 1.0
    target_rate: PositiveFloat | None = None
    max_idle_s: PositiveSeconds | None = Field(None, description="shorten any silence longer than this to it")
    requests: Requests | None = None
    duration_s: PositiveSeconds | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TraceLoad:
        if (self.timestamps is None) == (self.file is None):
            raise ValueError("give exactly one of 'file' and 'timestamps'")
        if self.timestamps is not None and max(self.timestamps) - min(self.timestamps) > SPAN_S:
            raise ValueError(f"timestamps span {max(self.timestamps) - min(self.timestamps):.3g} s, over the "
                             f"{SPAN_S // 86_400} days a phase may span")
        if self.target_rate is not None and self.time_scale != 1.0:
            raise ValueError("give 'time_scale' or 'target_rate', not both: target_rate sets the speed itself")
        return self


class BatchLoad(Strict):
    """Training-style: send `size` requests at once, wait for all of them, repeat `batches` times."""

    type: Literal["batch"]
    size: Requests
    batches: Requests = 1
    pack: Literal["requests", "inputs"] = Field(
        "requests", description="requests: `size` requests at once (generation); inputs: one request carrying "
        "`size` texts (an embeddings batch, as an offline job sends it), one at a time")

    @model_validator(mode="after")
    def _plan_fits(self) -> BatchLoad:
        if self.size * self.batches > PLANNED_REQUESTS:
            raise ValueError(f"size × batches is {self.size * self.batches:,}, over the {PLANNED_REQUESTS:,} "
                             "requests a phase may plan")
        return self


class ConcurrencyLoad(Strict):
    """Closed loop: `concurrency` users, each sending its next request when the last one ends."""

    type: Literal["concurrency"]
    concurrency: Requests
    requests: Requests | None = None
    duration_s: PositiveSeconds | None = None
    think_s: Seconds = Field(0.0, description="each user's pause between an answer and its next request")
    stagger_s: Seconds = Field(0.0, description="spread the users' first requests evenly "
                                                     "over this long, so they do not run in lockstep")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "think_time_ms" in data:
            # One name for think time across the scenario (sessions say think_s too).
            raise ValueError("'think_time_ms' is now 'think_s' (seconds, or with a unit: think_s: 500ms)")
        return data

    @model_validator(mode="after")
    def _bounded(self) -> ConcurrencyLoad:
        if self.requests is None and self.duration_s is None:
            raise ValueError("give 'requests' or 'duration_s' (or both) to bound the phase")
        return self


Load = Annotated[PoissonLoad | GammaLoad | ConstantLoad | RampLoad | TraceLoad | BatchLoad | ConcurrencyLoad,
                 Field(discriminator="type")]
LOAD_TAGS = {"poisson", "gamma", "constant", "ramp", "trace", "batch", "concurrency", "sharegpt", "shared_prefix"}


class Sweep(Strict):
    """Run the phase once per value: a list of rates (open loop) or of concurrencies (closed loop)."""

    rate: Annotated[list[PositiveFloat], Field(min_length=1)] | None = None
    concurrency: Annotated[list[PositiveInt], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_list(self) -> Sweep:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("give exactly one of 'rate' and 'concurrency'")
        return self


class Phase(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.=@-]+$")]
    load: Load
    max_in_flight: PositiveInt | None = Field(
        None, description="open loop: hold requests back beyond this many in flight (the wait shows as lag)")
    warmup_s: Seconds = 0.0
    cooldown_s: Seconds = 0.0
    sweep: Sweep | None = None
    thresholds: Thresholds = Field(default_factory=dict, description="this phase's own, over the scenario's")

    @model_validator(mode="after")
    def _sweepable(self) -> Phase:
        if self.sweep is None:
            return self
        if self.sweep.rate is not None and not hasattr(self.load, "rate"):
            raise ValueError("a rate sweep needs a poisson, gamma or constant load")
        if self.sweep.concurrency is not None and not isinstance(self.load, ConcurrencyLoad):
            raise ValueError("a concurrency sweep needs a concurrency load")
        return self

    def expand(self) -> list[Phase]:
        """The concrete phases of a sweep, one per value, named `name@rate=4` / `name@concurrency=8`."""
        if self.sweep is None:
            return [self]
        key, values = ("rate", self.sweep.rate) if self.sweep.rate is not None else (
            "concurrency", self.sweep.concurrency)
        return [self.changed(name=f"{self.name}@{key}={v:g}", sweep=None, load=self.load.changed(**{key: v}))
                for v in values or []]


def _bound(requests: int | None, duration_s: float | None) -> str:
    parts = ([f"{requests:,} requests"] if requests else []) + ([f"{duration_s:g} s"] if duration_s else [])
    return " or ".join(parts)


def describe(load: Load) -> str:
    """One line a person reads: 'poisson 10 req/s, 100 requests or 30 s', 'batch 32 × 4'."""
    if isinstance(load, BatchLoad):
        return f"batch {load.size} × {load.batches}"
    if isinstance(load, ConcurrencyLoad):
        return f"concurrency {load.concurrency}, {_bound(load.requests, load.duration_s)}"
    if isinstance(load, RampLoad):
        return f"ramp {load.start_rate:g}→{load.end_rate:g} req/s over {load.duration_s:g} s"
    if isinstance(load, TraceLoad):
        source = load.file or f"{len(load.timestamps or [])} timestamps"
        speed = f" at {load.target_rate:g} req/s" if load.target_rate else (
            f" ×{load.time_scale:g}" if load.time_scale != 1 else "")
        bound = _bound(load.requests, load.duration_s)
        return f"trace {source}{speed}" + (f", {bound}" if bound else "")
    shape = f"gamma cv {load.cv:g}" if isinstance(load, GammaLoad) else load.type
    return f"{shape} {load.rate:g} req/s, {_bound(load.requests, load.duration_s)}"
