"""Scenario files: YAML in, validated configuration out.

Every field is checked on load; an unknown key or a bad value becomes one `ScenarioError`
line naming the file and the field, which the CLI turns into exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from harness.config.simulator import SimulatorConfig
from harness.errors import ScenarioError

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _OpenLoop(_Strict):
    rate: PositiveFloat = Field(description="mean arrivals per second")
    requests: PositiveInt | None = None
    duration_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _bounded(self) -> _OpenLoop:
        if self.requests is None and self.duration_s is None:
            raise ValueError("give 'requests' or 'duration_s' (or both) to bound the phase")
        return self


class PoissonLoad(_OpenLoop):
    type: Literal["poisson"]


class GammaLoad(_OpenLoop):
    type: Literal["gamma"]
    cv: PositiveFloat = Field(description="coefficient of variation of the gaps; 1 is Poisson")


class ConstantLoad(_OpenLoop):
    type: Literal["constant"]


class RampLoad(_Strict):
    """Open loop whose rate moves linearly from `start_rate` to `end_rate` over `duration_s`."""

    type: Literal["ramp"]
    start_rate: PositiveFloat
    end_rate: PositiveFloat
    duration_s: PositiveFloat
    process: Literal["poisson", "constant"] = "poisson"
    requests: PositiveInt | None = None


class TraceColumns(_Strict):
    time: str = "timestamp"
    input: str = "input_tokens"
    output: str = "output_tokens"
    time_unit: Literal["s", "ms"] = "s"
    session: str | None = None


class TraceLoad(_Strict):
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
    start_s: Annotated[float, Field(ge=0)] = 0.0
    end_s: PositiveFloat | None = None
    time_scale: PositiveFloat = 1.0
    target_rate: PositiveFloat | None = None
    requests: PositiveInt | None = None
    duration_s: PositiveFloat | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TraceLoad:
        if (self.timestamps is None) == (self.file is None):
            raise ValueError("give exactly one of 'file' and 'timestamps'")
        return self


class BatchLoad(_Strict):
    """Training-style: send `size` requests at once, wait for all of them, repeat `batches` times."""

    type: Literal["batch"]
    size: PositiveInt
    batches: PositiveInt = 1


class ConcurrencyLoad(_Strict):
    """Closed loop: `concurrency` users, each sending its next request when the last one ends."""

    type: Literal["concurrency"]
    concurrency: PositiveInt
    requests: PositiveInt | None = None
    duration_s: PositiveFloat | None = None
    think_time_ms: Annotated[float, Field(ge=0)] = 0.0
    stagger_s: Annotated[float, Field(ge=0)] = Field(0.0, description="spread the users' first requests evenly "
                                                     "over this long, so they do not run in lockstep")

    @model_validator(mode="after")
    def _bounded(self) -> ConcurrencyLoad:
        if self.requests is None and self.duration_s is None:
            raise ValueError("give 'requests' or 'duration_s' (or both) to bound the phase")
        return self


Load = Annotated[PoissonLoad | GammaLoad | ConstantLoad | RampLoad | TraceLoad | BatchLoad | ConcurrencyLoad,
                 Field(discriminator="type")]
_LOAD_TAGS = {"poisson", "gamma", "constant", "ramp", "trace", "batch", "concurrency", "sharegpt", "shared_prefix"}


class Sweep(_Strict):
    """Run the phase once per value: a list of rates (open loop) or of concurrencies (closed loop)."""

    rate: Annotated[list[PositiveFloat], Field(min_length=1)] | None = None
    concurrency: Annotated[list[PositiveInt], Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_list(self) -> Sweep:
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError("give exactly one of 'rate' and 'concurrency'")
        return self


class Phase(_Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.=@-]+$")]
    load: Load
    max_in_flight: PositiveInt | None = Field(
        None, description="open loop: hold requests back beyond this many in flight (the wait shows as lag)")
    warmup_s: Annotated[float, Field(ge=0)] = 0.0
    cooldown_s: Annotated[float, Field(ge=0)] = 0.0
    sweep: Sweep | None = None

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
        return [self.model_copy(update={"name": f"{self.name}@{key}={v:g}", "sweep": None,
                                        "load": self.load.model_copy(update={key: v})})
                for v in values or []]


class LengthDist(_Strict):
    """A distribution of token counts, drawn per request (seeded), clamped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal", "empirical"]
    value: PositiveInt | None = Field(None, description="fixed")
    mean: PositiveFloat | None = Field(None, description="normal")
    std: Annotated[float, Field(ge=0)] | None = Field(None, description="normal")
    median: PositiveFloat | None = Field(None, description="lognormal: exp(mu)")
    sigma: Annotated[float, Field(ge=0)] | None = Field(None, description="lognormal: std of the log")
    file: str | None = Field(None, description="empirical: a trace file, relative to the scenario file")
    column: Literal["input", "output"] = Field("input", description="empirical: which lengths to sample")
    min: PositiveInt = 1
    max: PositiveInt | None = None

    @model_validator(mode="after")
    def _parameters(self) -> LengthDist:
        needs = {"fixed": ("value",), "uniform": ("max",), "normal": ("mean", "std"),
                 "lognormal": ("median", "sigma"), "empirical": ("file",)}[self.dist]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise ValueError(f"'{self.dist}' needs {', '.join(repr(m) for m in missing)}")
        if self.max is not None and self.max < self.min:
            raise ValueError("'max' is below 'min'")
        return self


Length = PositiveInt | LengthDist


class ShareGPTDataset(_Strict):
    """Conversations in ShareGPT format: each human turn is a request carrying the history before it."""

    type: Literal["sharegpt"]
    file: str = Field(description="ShareGPT JSON, relative to the scenario file")
    output_tokens: Literal["reply", "workload"] = Field(
        "reply", description="reply: the recorded answer's length; workload: workload.output_tokens")
    max_turns: PositiveInt | None = None


class SharedPrefixDataset(_Strict):
    """N system prompts of P tokens, each request one of them followed by its own question."""

    type: Literal["shared_prefix"]
    prefixes: PositiveInt = 4
    prefix_tokens: PositiveInt = 1024
    question_tokens: Length = 64


Dataset = Annotated[ShareGPTDataset | SharedPrefixDataset, Field(discriminator="type")]


class Workload(_Strict):
    prompt_tokens: Length = 256
    output_tokens: Length = 128
    ignore_eos: bool = Field(True, description="ask the server for exactly output_tokens tokens")
    dataset: Dataset | None = Field(None, description="prompts from a dataset instead of prompt_tokens")
    tokenizer: str | None = Field(None, description="a local Hugging Face tokenizer (directory or tokenizer.json)"
                                  " to build prompts of exact length for a real model; never downloaded")


class SLO(_Strict):
    """Per-request limits in milliseconds; None: not set. Goodput counts the requests within every one."""


    ttft_ms: PositiveFloat | None = None
    tpot_ms: PositiveFloat | None = None
    e2e_ms: PositiveFloat | None = None


class EndpointConfig(_Strict):
    url: str | None = Field(None, description="OpenAI base URL, e.g. http://host:8000/v1; none: the simulator")
    model: str | None = None
    api: Literal["chat", "completions"] = "chat"
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key")
    metrics_url: str | None = Field(None, description="Prometheus /metrics to scrape; none: origin + /metrics")
    scrape_interval_s: float = Field(1.0, ge=0, description="seconds between scrapes; 0: no scraping")


class ClientConfig(_Strict):
    http: Literal["h1", "aiohttp"] = Field("h1", description="h1: the lean streaming client; aiohttp: the "
                                           "general one (proxies, HTTP quirks)")
    connect_timeout_s: PositiveFloat = 10.0
    first_token_timeout_s: PositiveFloat | None = 120.0
    request_timeout_s: PositiveFloat = 300.0
    stop_grace_s: Annotated[float, Field(ge=0)] = Field(30.0, description="on Ctrl-C/SIGTERM, wait this long "
                                                        "for requests in flight before cancelling them")
    continuous_usage: bool = Field(False, description="ask for usage on every chunk (vLLM's continuous_usage_stats)"
                                   " to count tokens per chunk exactly")
    schedule_lag_bound_ms: PositiveFloat = 5.0
    loop_lag_bound_ms: PositiveFloat = 5.0
    cpu_bound: Annotated[float, Field(gt=0, le=1)] = 0.9


class Scenario(_Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    seed: int = 0
    workload: Workload = Workload()
    slo: SLO = SLO()
    endpoint: EndpointConfig = EndpointConfig()
    simulator: SimulatorConfig = SimulatorConfig()
    client: ClientConfig = ClientConfig()
    phases: Annotated[list[Phase], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_phase_names(self) -> Scenario:
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise ValueError("phase names must be unique")
        return self

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def _union_member(part: int | str) -> bool:
    """pydantic's name for a union member (constrained-int, LengthDist, a load tag), not a key."""
    return isinstance(part, str) and (part in _LOAD_TAGS or "-" in part or part[:1].isupper())


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _union_member(part):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


_WRONG_KIND = {"int_type", "int_parsing", "model_type", "dict_type", "model_attributes_type", "float_type",
               "float_parsing"}


def _rank(error: Any) -> int:
    """Which of several errors to report: an unknown key (the likeliest typo), then a bad value, then a
    wrong kind of value — for a field that takes an integer or a mapping, the member the user was
    writing says more than the one they were not."""
    if error["type"] == "extra_forbidden":
        return 0
    return 2 if error["type"] in _WRONG_KIND else 1


def parse_scenario(data: Any, source: str) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping of fields")
    try:
        scenario = Scenario.model_validate(data)
        if any(p.sweep is not None for p in scenario.phases):
            # Validated again once expanded: the names of the swept phases must be unique too.
            expanded = [q.model_dump(mode="json") for p in scenario.phases for q in p.expand()]
            scenario = Scenario.model_validate({**scenario.model_dump(mode="json"), "phases": expanded})
        return scenario
    except ValidationError as exc:
        raise ScenarioError(_problems(exc, source)) from None


_MAX_PROBLEMS = 10


def _problems(exc: ValidationError, source: str) -> str:
    """Every problem of the scenario, one line each (capped): for a field that could take several shapes,
    only the likeliest complaint (see `_rank`)."""
    best: dict[tuple[int | str, ...], Any] = {}
    for err in exc.errors():
        loc = tuple(err["loc"])
        root = next((loc[:i] for i, part in enumerate(loc) if _union_member(part)), loc)
        if root not in best or _rank(err) < _rank(best[root]):
            best[root] = err
    lines = [f"{source}: {_field_path(e['loc'])}: {_message(e)}" for e in sorted(best.values(), key=_rank)]
    if len(lines) > _MAX_PROBLEMS:
        lines = [*lines[:_MAX_PROBLEMS], f"{source}: … and {len(lines) - _MAX_PROBLEMS} more problems"]
    return "\n".join(lines)


def _message(err: Any) -> str:
    return "unknown field" if err["type"] == "extra_forbidden" else str(err["msg"]).removeprefix("Value error, ")


def _resolve_trace_files(data: Any, base: Path) -> None:
    """Trace files are named relative to the scenario file; make them absolute before validation."""
    if not isinstance(data, dict):
        return
    holders: list[Any] = []
    if isinstance(data.get("phases"), list):
        holders += [p.get("load") for p in data["phases"] if isinstance(p, dict)]
    if isinstance(data.get("workload"), dict):
        workload = data["workload"]
        holders += [workload.get(k) for k in ("prompt_tokens", "output_tokens", "dataset")]
        if isinstance(workload.get("tokenizer"), str):
            workload["tokenizer"] = str((base / workload["tokenizer"]).resolve())
    for holder in holders:
        if isinstance(holder, dict) and isinstance(holder.get("file"), str):
            holder["file"] = str((base / holder["file"]).resolve())


def load_scenario(path: Path) -> Scenario:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ScenarioError(f"{path}: {where}{problem}") from None
    _resolve_trace_files(data, path.parent)
    scenario = parse_scenario(data, str(path))
    files = [(f"phases[{i}].load.file", getattr(p.load, "file", None)) for i, p in enumerate(scenario.phases)]
    files += [(f"workload.{name}.file", getattr(getattr(scenario.workload, name), "file", None))
              for name in ("prompt_tokens", "output_tokens", "dataset")]
    for field, file in files:
        if file is not None and not Path(file).is_file():
            raise ScenarioError(f"{path}: {field}: no such file {file}")
    return scenario
