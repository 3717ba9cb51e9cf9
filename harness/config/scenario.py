"""Scenario files: YAML in, validated configuration out.

Every field is checked on load; an unknown key or a bad value becomes one `ScenarioError`
line naming the file and the field, which the CLI turns into exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    Field,
    SerializationInfo,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from harness.config.base import PositiveMillis, PositiveSeconds, Seconds, Strict, WebUrl, first_error
from harness.config.labels import Scalar, check_labels, check_metadata
from harness.config.load import Phase
from harness.config.problems import problems
from harness.config.request_shape import Body, Sampling, body_fields, check_body, check_header, saved
from harness.config.simulator import SimulatorConfig
from harness.config.thresholds import Thresholds
from harness.config.workload import Workload
from harness.devices.catalogue import catalogue, resolve_accelerator, resolve_model, use
from harness.devices.formats import Weights
from harness.errors import ScenarioError
from harness.yamlfile import read_yaml

SAVING = "saving"  # serialisation context: the dump is written to disk


class SLO(Strict):
    """Per-request limits in milliseconds; None: not set. Goodput counts the requests within every one."""

    ttft_ms: PositiveMillis | None = Field(None, description="time to the first token of any kind, thinking included")
    ttft_answer_ms: PositiveMillis | None = Field(None, description="time to the first answer token (after any "
                                                  "reasoning): what a chat user waits for")
    tpot_ms: PositiveMillis | None = None
    e2e_ms: PositiveMillis | None = None


# The server-side series the harness reads (harness.stats.server maps each to the names engines give it). A
# dialect's name: which ones the harness speaks is the client's registry (`harness.client.dialects`), checked
# where the endpoint is built, before anything is sent.
ApiName = Annotated[str, Field(pattern=r"^[a-z][a-z_]{0,31}$")]
ServerSeries = Literal["running", "waiting", "kv_cache_usage", "generation_tokens_total", "prompt_tokens_total",
                       "preemptions_total", "prefix_cache_queries_total", "prefix_cache_hits_total",
                       "prefix_cache_hit_rate", "memory_bound_seconds_total", "compute_bound_seconds_total",
                       "hbm_read_bytes_total", "flops_total", "peak_hbm_bytes_per_second", "peak_flops_per_second"]


class Hardware(Strict):
    """What the endpoint runs on, as presets: the harness then estimates where each phase's stress landed
    (MBU, MFU) from the measured inter-token latency and batch. An estimate, and reported as one."""

    accelerator: str | dict[str, Any] = Field(description="a preset (`harness sim presets`) or a custom "
                                              "accelerator's fields (tflops, hbm_tbps, memory_gb, …)")
    model: str | dict[str, Any] | None = Field(None, description="a preset or a custom model's fields (layers, "
                                               "hidden, q_heads, kv_heads, head_dim, params_b, vocab, …); "
                                               "default: the endpoint's model, when it is a preset")
    tp: Annotated[int, Field(ge=1, le=64)] = Field(1, description="tensor parallelism: devices per replica")
    weights: Weights = Field("auto", validation_alias=AliasChoices("weights", "dtype"),
                             description="the weights' number format (bf16, fp8, int8, int4, fp4); auto: the "
                                         "model's checkpoint's")

    @model_validator(mode="after")
    def _known(self) -> Hardware:
        resolve_accelerator(self.accelerator)
        if self.model is not None:
            resolve_model(self.model)
        return self


def parse_hardware(text: str) -> Hardware:
    """`h100-sxm` or `h100-sxm,model=llama-3.1-8b,tp=2,weights=fp8` (the `--hardware` flag; `dtype=` its
    earlier name); ValueError naming what is wrong."""
    accelerator, *items = [part.strip() for part in text.split(",")]
    fields: dict[str, Any] = {"accelerator": accelerator}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in ("model", "tp", "weights", "dtype"):
            raise ValueError(f"{item!r}: expected model=…, tp=… or weights=…")
        fields[key] = value
    try:
        return Hardware.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(first_error(exc)) from None


class EndpointConfig(Strict):
    url: WebUrl | None = Field(None, description="OpenAI base URL, e.g. http://host:8000/v1; none: the simulator")
    model: str | None = None
    api: ApiName = Field("chat", description="the API driven, by its dialect's name: chat, completions, … "
                         "(docs/apis.md lists them; `harness run --help` too)")
    stream: bool = Field(True, description="false: ask for each answer whole, unstreamed (no TTFT, ITL or TPOT: "
                         "end to end only); embeddings are always whole")
    wait_s: Seconds = Field(0.0, description="keep asking the endpoint for its models this long while it does not "
                            "answer (a server still starting, as in a compose stack) before giving up")
    accelerator: str | None = Field(None, description="what the endpoint runs on, as you declare it "
                                    "(e.g. '8×H100 SXM, TP 8'): shown in the report's header")
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key")
    hardware: Hardware | None = Field(None, description="presets for what it runs on: each phase then gets an "
                                      "estimate of its MBU and MFU (docs/output.md)")
    metrics_url: WebUrl | None = Field(None, description="Prometheus /metrics to scrape; none: origin + /metrics")
    scrape_interval_s: Seconds = Field(1.0, description="seconds between scrapes; 0: no scraping")
    server_metrics: dict[ServerSeries, str] | None = Field(
        None, description="our series -> the endpoint's metric name, for an engine nobody mapped "
        "(e.g. {running: myengine_active_requests}); counters with their _total suffix")

    headers: dict[str, str] = Field(default_factory=dict, description="a gateway's headers on every request, e.g. "
                                    "{X-Org: acme, api-key: 'env:AZURE_KEY'}: env:NAME reads the environment; a "
                                    "literal value is sent, and saved with the run as [REDACTED]")
    api_key_header: Annotated[str, Field(min_length=1)] = Field(
        "Authorization", description="the header the API key goes in: Authorization as 'Bearer KEY', any other "
        "name (Azure's api-key) as the key alone")
    sampling: Sampling | None = Field(None, description="temperature, top_p, top_k, min_p, seed, stop, penalties: "
                                      "sent with every request")
    extra_body: Body = Field(default_factory=dict, description="more JSON fields for every request's "
                                       "body (an engine's own: chat_template_kwargs, priority, min_tokens, "
                                       "response_format, …), over the sampling fields")
    ca_bundle: str | None = Field(None, description="https: trust this CA bundle (PEM file) too")
    insecure: bool = Field(False, description="https: check no certificate (warned at the start)")

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            check_header(name, value)
        return headers

    @field_validator("api_key_header")
    @classmethod
    def _key_header(cls, name: str) -> str:
        check_header(name, "")
        return name

    @field_validator("extra_body")
    @classmethod
    def _extra_body(cls, extra: Body) -> Body:
        check_body(extra)
        return extra

    @model_validator(mode="after")
    def _key_header_not_a_header(self) -> EndpointConfig:
        named = self.api_key_header.lower()
        if named != "authorization" and named in {h.lower() for h in self.headers}:
            raise ValueError(f"api_key_header {self.api_key_header}: a header of that name is given too (--header): "
                             "one of them would be dropped from every request; give the key or the header, not both")
        return self

    @field_serializer("headers")
    def _saved_headers(self, headers: dict[str, str], info: SerializationInfo) -> dict[str, str]:
        # A scenario is saved with every run (`to_yaml`): header values never are.
        return saved(headers) if (info.context or {}).get(SAVING) else headers

    @property
    def body_fields(self) -> Body:
        return body_fields(self.sampling, self.extra_body)


class ClientConfig(Strict):
    http: Literal["h1", "aiohttp"] = Field("h1", description="h1: the lean streaming client; aiohttp: the "
                                           "general one (HTTP quirks)")
    connect_timeout_s: PositiveSeconds = 10.0
    first_token_timeout_s: PositiveSeconds | None = 120.0
    request_timeout_s: PositiveSeconds = 300.0
    stop_grace_s: Seconds = Field(30.0, description="on Ctrl-C/SIGTERM, wait this long "
                                                        "for requests in flight before cancelling them")
    worker_silence_s: PositiveSeconds = Field(30.0, description="--workers/--ray: a worker that says nothing this "
                                              "long (frozen, stuck; it beats every second) is killed, its shard "
                                              "counted lost from there, and the run goes on")
    continuous_usage: bool = Field(False, description="ask for usage on every chunk (vLLM's continuous_usage_stats)"
                                   " to count tokens per chunk exactly")
    read_window_us: Annotated[float, Field(ge=0, le=2000)] = Field(
        0.0, description="h1 only: after each loop pass that read tokens, sleep this long before polling again, for "
        "fewer, fuller reads (a ceiling run's client CPU); every stamp may be this late, plus a pass; 0: off")
    schedule_lag_bound_ms: PositiveMillis = 5.0
    loop_lag_bound_ms: PositiveMillis = 5.0
    cpu_bound: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_shift: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.05, description="a figure the harness's own lateness could have moved by more than this share is "
        "untrusted (client_limited_metrics); the lag bounds above then only judge runs without that estimate")
    lookahead_requests: Annotated[int, Field(ge=1)] = Field(
        256, description="requests built ahead of their time on a worker thread, at most")
    lookahead_s: PositiveSeconds = Field(2.0, description="and at most this far ahead on the schedule")
    records_in_memory: Annotated[int, Field(ge=1000)] | None = Field(
        200_000, description="records a run holds for exact statistics and the report; past it, a phase's "
        "percentiles come from histograms (within 0.1%) and memory stops growing (docs/load-engine.md); null: all")

    @model_validator(mode="after")
    def _window_needs_h1(self) -> ClientConfig:
        if self.read_window_us and self.http != "h1":
            raise ValueError("read_window_us needs http: h1 (aiohttp's reads are its own)")
        return self


class Pushgateway(Strict):
    """Where a run pushes its summary when it ends, however it ends (completed, failed or stopped)."""

    url: WebUrl = Field(description="the Pushgateway's base URL, e.g. http://pushgateway:9091 (credentials in it "
                        "are dropped: never sent, printed or saved)")
    job: Annotated[str, Field(min_length=1)] = "harness"
    labels: dict[str, str] = Field(default_factory=dict, description="more grouping labels, e.g. {branch: main}")

    @model_validator(mode="before")
    @classmethod
    def _url_alone(cls, data: Any) -> Any:
        return {"url": data} if isinstance(data, str) else data  # `pushgateway: http://…` is enough


class Scenario(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    seed: int = 0
    workload: Workload = Workload()
    slo: SLO = SLO()
    endpoint: EndpointConfig = EndpointConfig()
    simulator: SimulatorConfig = SimulatorConfig()
    client: ClientConfig = ClientConfig()
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = Field(
        0, description="serve the harness's own Prometheus metrics on this port while the run lasts; 0: off")
    metrics_hold_s: Seconds = Field(0.0, description="keep serving them this long after the run, so a last "
                                    "scrape sees the final counts")
    pushgateway: Pushgateway | None = None
    thresholds: Thresholds = Field(default_factory=dict, description="pass/fail limits on every phase's figures, "
                                   "e.g. {ttft_p99: '<500ms', error_rate: '<1%'}; a phase's own add to them")
    labels: dict[str, str] = Field(default_factory=dict, description="the run's tags, e.g. {branch: main, engine: "
                                   "vllm-0.32} (--label k=v): in summary.json, the exports, the history, the metrics")
    metadata: dict[str, Scalar] = Field(default_factory=dict, description="facts about the run, a flat mapping "
                                        "(--metadata FILE): in summary.json and the exports")
    phases: Annotated[list[Phase], Field(min_length=1)]

    @field_validator("labels")
    @classmethod
    def _fit_labels(cls, v: dict[str, str]) -> dict[str, str]:
        return check_labels(v)

    @field_validator("metadata")
    @classmethod
    def _fit_metadata(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        return check_metadata(v)

    @model_validator(mode="after")
    def _unique_phase_names(self) -> Scenario:
        names = [p.name for p in self.phases]
        if len(set(names)) != len(names):
            raise ValueError("phase names must be unique")
        if self.workload.sessions is not None:
            closed = [p.name for p in self.phases if p.load.type in ("batch", "concurrency")]
            if closed:
                raise ValueError(f"workload.sessions start conversations open-loop: phase {closed[0]} has a "
                                 "batch or concurrency load (give it a poisson, gamma, constant, ramp or trace load)")
        return self

    def to_yaml(self) -> str:
        """The scenario as saved with a run: rerunnable, and without a secret (`SAVING`)."""
        return yaml.safe_dump(self.model_dump(mode="json", context={SAVING: True}), sort_keys=False)


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
        raise ScenarioError(problems(exc, source)) from None


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
        if isinstance(workload.get("tokenizer"), str) and workload["tokenizer"] not in ("server", "words"):
            workload["tokenizer"] = str((base / workload["tokenizer"]).resolve())
    for holder in holders:
        if isinstance(holder, dict) and isinstance(holder.get("file"), str):
            holder["file"] = str((base / holder["file"]).resolve())


def load_scenario(path: Path) -> Scenario:
    use(catalogue().beside(path))  # a run's folder: the presets its run used, for this process from now on
    try:
        data = read_yaml(path)
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    _resolve_trace_files(data, path.parent)
    scenario = parse_scenario(data, str(path))
    files = [(f"phases[{i}].load.file", getattr(p.load, "file", None)) for i, p in enumerate(scenario.phases)]
    files += [(f"workload.{name}.file", getattr(getattr(scenario.workload, name), "file", None))
              for name in ("prompt_tokens", "output_tokens", "dataset")]
    for field, file in files:
        if file is not None and not Path(file).is_file():
            raise ScenarioError(f"{path}: {field}: no such file {file}")
    return scenario
