"""The one description of the bundled simulator: the scenario's `simulator:` section, the options of
`harness sim serve`, the bundled process and `harness predict` all take this model.

Shared by both sides: the simulator imports it, and it imports nothing but the device catalogue.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from harness.config.base import Changeable
from harness.config.fleet import MAX_REPLICAS, FirstToken, KvLink, KvTransfer, Pool, Router
from harness.devices.catalogue import catalogue
from harness.devices.formats import Weights

Rate = Annotated[float, Field(ge=0, le=1)]
NonNegative = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]

# OpenAI error type per status the simulator can inject.
ERROR_TYPES = {400: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error"}


class _Strict(Changeable):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FaultConfig(_Strict):
    """Seeded faults, drawn per request in arrival order."""

    error_rate: Rate = Field(0.0, description="share of requests answered with error_status")
    error_status: Literal[400, 429, 500, 503] = 500
    stall_rate: Rate = Field(0.0, description="share of streams that stall once for stall_ms")
    stall_ms: NonNegative = 1000.0
    disconnect_rate: Rate = Field(0.0, description="share of streams cut mid-answer")
    malformed_rate: Rate = Field(0.0, description="share of streams with one malformed chunk")
    seed: int = 0

    @classmethod
    def from_json(cls, data: object, base: FaultConfig) -> FaultConfig:
        """`base` updated with the fields of a JSON object; unknown fields are an error."""
        if not isinstance(data, dict):
            raise ValueError("fault configuration must be a JSON object")
        unknown = set(data) - set(cls.model_fields)
        if unknown:
            raise ValueError(f"unknown fault field {sorted(unknown)[0]!r}")
        return cls.model_validate({**base.model_dump(), **data})

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()


class SimulatorConfig(_Strict):
    accelerator: str = Field("h100-sxm", description="see `harness sim presets`")
    model: str = Field("llama-3.1-8b", description="see `harness sim presets`")
    served_model_name: str | None = Field(None, description="model name clients must send (default: model)")
    weights: Weights = Field("auto", validation_alias=AliasChoices("weights", "dtype"),
                             description="the weights' number format: bf16, fp8 (W8A8), int8 (W8A8), int4 (W4A16: "
                                         "AWQ, GPTQ), fp4 (MXFP4/NVFP4); auto: the model's checkpoint's "
                                         "(docs/simulator.md, 'Number formats'; `dtype` its earlier name)")
    kv_cache_dtype: Literal["auto", "fp8"] = Field(
        "auto", description="vLLM's --kv-cache-dtype: auto keeps the KV cache in bf16; fp8 halves its bytes (twice "
                            "the tokens in the same memory, half the bytes a decode reads)")
    tp: Annotated[int, Field(ge=1, le=64)] = Field(1, description="tensor parallelism")
    max_num_seqs: PositiveInt = Field(1024, description="default: vLLM 0.33's for the accelerator (docs/simulator.md)")
    max_num_batched_tokens: PositiveInt = Field(8192, description="default: vLLM 0.33's for the accelerator")
    gpu_memory_utilization: Annotated[float, Field(ge=0.05, le=1.0)] = 0.9
    max_model_len: Annotated[int, Field(ge=16)] | None = Field(None, description="default: the model's")
    prefix_caching: bool = Field(True, description="automatic prefix caching")
    enforce_eager: bool = Field(False, description="vLLM's --enforce-eager: no CUDA graphs, so a decode step is not "
                                                   "padded to a captured batch size (1, 2, 4, 8, 16, 24, …)")
    enable_expert_parallel: bool = Field(
        False, description="vLLM's --enable-expert-parallel: a mixture-of-experts model's ranks hold whole experts "
                            "(the first ranks one more when they do not divide); no effect on a dense model")
    scheduler_compat: Literal["0.33", "0.11", "0.4"] = Field(
        "0.33", description="the vLLM scheduler followed; 0.11: its older rules (docs/vllm.md); 0.4: before chunked "
                            "prefill, a step of prompts or of decodes (docs/fleets.md)")
    async_scheduling: bool = Field(True, description="overlap the host's step preparation with the device's "
                                                     "work, as vLLM does by default (default off with 0.11)")
    enable_prompt_tokens_details: bool = Field(False, description="vLLM's flag: usage says how many prompt tokens "
                                               "the prefix cache served (prompt_tokens_details.cached_tokens)")
    default_max_tokens: PositiveInt | None = Field(None, description="an answer's cap when a request gives no "
                                                   "max_tokens; null: vLLM's, 16 on /v1/completions and the context "
                                                   "left on chat")
    seed: int = Field(0, description="seeds step noise and lengths")
    noise_sigma: Rate = Field(0.03, description="multiplicative step-time noise (lognormal sigma)")
    # A known regression on demand: what a user tests their own alarm with (docs/recipes.md).
    slowdown: Annotated[float, Field(ge=0.1, le=100)] = Field(
        1.0, description="every engine step this many times longer (1.2: a 20% slower server; fixed timing: its "
                         "TTFT and ITL)")
    timing: Literal["engine", "fixed"] = Field(
        "engine", description="engine: continuous batching on the roofline model; fixed: constant TTFT and ITL "
                              "whatever the load (for calibrating clients)")
    fixed_ttft_ms: NonNegative = 50.0
    fixed_itl_ms: NonNegative = 10.0
    stream_writes: Literal["step", "token"] = Field(
        "step", description="step: each engine step's new tokens of a stream in one write; token: every stream "
                            "event in its own socket write, on its own turn of the event loop (as vLLM with stream "
                            "interval 1, llama.cpp and TGI stream)")
    max_waiting: Annotated[int, Field(ge=0)] | None = Field(
        None, description="answer 429 with Retry-After while this many requests wait")
    startup_delay_s: NonNegative = Field(0.0, description="answer 503 for this long after starting")
    reasoning_tokens: Annotated[int, Field(ge=0)] = Field(
        0, description="a reasoning model: each chat answer's first N tokens stream as delta.reasoning_content "
                       "(vLLM's and SGLang's reasoning parsers), counted in usage.completion_tokens_details")
    image_patch_px: Annotated[int, Field(ge=1, le=1024)] = Field(
        28, description="an image's pixels per prompt token, a side (Qwen2-VL / 2.5-VL: 14-pixel patches merged 2 × 2)")
    vision_encoder_b: Annotated[float, Field(ge=0, le=100)] = Field(
        0.675, description="the vision encoder's parameters, billions (Qwen2.5-VL's ViT: 0.675): each image costs "
                           "2 × parameters × patches FLOPs before its prefill")
    faults: FaultConfig = FaultConfig()
    # A deployment beyond one server (docs/fleets.md): the fields above describe each server of the decode pool
    # (or of the only pool), these how many there are, what routes to them, and a prefill pool before them.
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = Field(
        1, description="servers behind one endpoint (of the decode pool when a prefill pool is given)")
    router: Router = Field("round_robin", description="which replica takes a request: round_robin, "
                           "least_outstanding (fewest running and waiting), prefix_aware (llm-d's scorer)")
    prefill: Pool | None = Field(None, description="disaggregated: a prefill pool, ACCELERATOR[:TP[:REPLICAS]] "
                                 "(in a scenario: accelerator, tp, replicas); the decode pool is the fields above")
    kv_link: KvLink = Field("infiniband", description="what carries a prompt's KV from prefill to decode: nvlink, "
                            "infiniband (NDR), infiniband-hdr, roce, pcie (docs/fleets.md: each one's figures)")
    kv_transfer: KvTransfer = Field("whole", description="whole: after the prefill (vLLM's NIXL connector); "
                                    "layerwise: as each layer is computed (Splitwise)")
    first_token: FirstToken = Field("decode", description="which pool's token is a disaggregated request's first: "
                                    "decode (vLLM's proxy, llm-d) or prefill (DistServe, Splitwise)")

    @model_validator(mode="before")
    @classmethod
    def _device_batch_defaults(cls, data: Any) -> Any:
        """Sequence cap and token budget not given: vLLM's defaults for the accelerator."""
        if not isinstance(data, dict):
            return data
        accelerator = data.get("accelerator", cls.model_fields["accelerator"].default)
        if accelerator not in catalogue().devices:
            return data  # the field's own check names it
        seqs, tokens = catalogue().devices[accelerator].batch_defaults()
        older = {"async_scheduling": False} if data.get("scheduler_compat") in ("0.11", "0.4") else {}
        return {"max_num_seqs": seqs, "max_num_batched_tokens": tokens, **older, **data}

    @model_validator(mode="after")
    def _fleet_on_the_engine(self) -> SimulatorConfig:
        if self.fleet and self.timing == "fixed":
            raise ValueError("replicas and prefill pools are served on the engine (timing: engine); fixed timing "
                             "has no engine to route to")
        return self

    @field_validator("prefill")
    @classmethod
    def _known_pool(cls, v: Pool | None) -> Pool | None:
        if v is not None and v.accelerator not in catalogue().devices:
            raise ValueError(f"unknown accelerator {v.accelerator!r}; known: {', '.join(sorted(catalogue().devices))}")
        return v

    @field_validator("accelerator", "model")
    @classmethod
    def _known_preset(cls, v: str, info: ValidationInfo) -> str:
        presets = catalogue().devices if info.field_name == "accelerator" else catalogue().models
        if v not in presets:
            raise ValueError(f"unknown {info.field_name} {v!r}; known: {', '.join(sorted(presets))}")
        return v

    @property
    def slowed(self) -> str:
        """How the plan and the report say a slowdown was asked for ('' without one)."""
        return f", every step {self.slowdown:g}× longer (--slowdown)" if self.slowdown != 1 else ""

    def on_scheduler(self, compat: str) -> SimulatorConfig:
        """This configuration on another vLLM scheduler with that scheduler's async default (`changed` would keep
        this one's flag: 0.11 and 0.4 schedule nothing ahead)."""
        return self.changed(scheduler_compat=compat, async_scheduling=compat == "0.33")

    @property
    def fleet(self) -> bool:
        """More than one server: replicas, or a prefill pool of its own."""
        return self.replicas > 1 or self.prefill is not None

    @property
    def name(self) -> str:
        return self.served_model_name or self.model
