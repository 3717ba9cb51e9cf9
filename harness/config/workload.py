"""What a scenario's requests ask for: length distributions, datasets, tokenizer."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.config.base import PositiveInt, PositiveSeconds, Seconds, Strict, TokenCount
from harness.limits import IMAGE_BYTES, TOKENS


class LengthDist(Strict):
    """A distribution of token counts, drawn per request (seeded), clamped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal", "empirical"]
    value: TokenCount | None = Field(None, description="fixed")
    mean: Annotated[float, Field(gt=0, le=TOKENS)] | None = Field(None, description="normal")
    std: Annotated[float, Field(ge=0)] | None = Field(None, description="normal")
    median: Annotated[float, Field(gt=0, le=TOKENS)] | None = Field(None, description="lognormal: exp(mu)")
    sigma: Annotated[float, Field(ge=0)] | None = Field(None, description="lognormal: std of the log")
    file: str | None = Field(None, description="empirical: a trace file, relative to the scenario file")
    column: Literal["input", "output"] = Field("input", description="empirical: which lengths to sample")
    min: TokenCount = 1
    max: TokenCount | None = None

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


Length = TokenCount | LengthDist


class ShareGPTDataset(Strict):
    """Conversations in ShareGPT format: each human turn is a request carrying the history before it."""

    type: Literal["sharegpt"]
    file: str = Field(description="ShareGPT JSON, relative to the scenario file")
    output_tokens: Literal["reply", "workload"] = Field(
        "reply", description="reply: the recorded answer's length; workload: workload.output_tokens")
    max_turns: PositiveInt | None = None


class SharedPrefixDataset(Strict):
    """N system prompts of P tokens, each request one of them followed by its own question."""

    type: Literal["shared_prefix"]
    prefixes: PositiveInt = 4
    prefix_tokens: PositiveInt = 1024
    question_tokens: Length = 64


Dataset = Annotated[ShareGPTDataset | SharedPrefixDataset, Field(discriminator="type")]


class ThinkTime(Strict):
    """Seconds a user takes between an answer's end and their next turn, drawn per turn (seeded)."""

    dist: Literal["fixed", "exponential", "uniform", "lognormal"]
    value_s: Seconds | None = Field(None, description="fixed")
    mean_s: PositiveSeconds | None = Field(None, description="exponential")
    min_s: Seconds = Field(0.0, description="uniform")
    max_s: PositiveSeconds | None = Field(None, description="uniform")
    median_s: PositiveSeconds | None = Field(None, description="lognormal")
    sigma: Annotated[float, Field(ge=0)] | None = Field(None, description="lognormal")

    @model_validator(mode="after")
    def _parameters(self) -> ThinkTime:
        needs = {"fixed": ("value_s",), "exponential": ("mean_s",), "uniform": ("max_s",),
                 "lognormal": ("median_s", "sigma")}[self.dist]
        missing = [name for name in needs if getattr(self, name) is None]
        if missing:
            raise ValueError(f"'{self.dist}' needs {', '.join(repr(m) for m in missing)}")
        return self


class Sessions(Strict):
    """Multi-turn conversations: the open-loop load's arrivals start conversations; each next turn is sent
    when the previous answer has ended plus a think time, with the real answers so far as its history."""

    think_s: Seconds | ThinkTime = 0.0
    turns: PositiveInt | None = Field(None, description="turns per conversation without a dataset or trace "
                                      "sessions (each a new user message of workload.prompt_tokens)")
    max_turns: PositiveInt = Field(64, le=1000, description="cap on any conversation's turns")




class Images(Strict):
    """Images sent with each prompt (chat, Responses, Messages): seeded, synthetic, each request its own."""

    count: Annotated[int, Field(ge=1, le=16)] = 1
    width: Annotated[int, Field(ge=16, le=4096)] = 512
    height: Annotated[int, Field(ge=16, le=4096)] = 512
    format: Literal["png", "jpeg"] = "png"

    @model_validator(mode="after")
    def _bounded(self) -> Images:
        if (raw := self.count * self.width * self.height * 3) > IMAGE_BYTES:
            raise ValueError(f"count × width × height × 3 is {raw / 2**20:.0f} MiB of pixels a request, over "
                             f"{IMAGE_BYTES >> 20}: fewer or smaller images")
        return self


class Workload(Strict):
    prompt_tokens: Length = 256
    output_tokens: Length = 128
    images: Images | None = Field(None, description="images sent with every prompt as base64 image parts "
                                  "(docs/apis.md#images-in-prompts)")
    ignore_eos: bool = Field(True, description="ask the server for exactly output_tokens tokens")
    dataset: Dataset | None = Field(None, description="prompts from a dataset instead of prompt_tokens")
    tokenizer: str | None = Field(None, description="a local Hugging Face tokenizer (directory or tokenizer.json)"
                                  " to build prompts of exact length for a real model, never downloaded; "
                                  "'server': the endpoint's own /tokenize counts (an error if it cannot); 'words':"
                                  " the harness's words, one token each at the simulator; null: the endpoint's "
                                  "/tokenize where it counts the words otherwise, else the words")
    prompt_reuse: Literal["per_run", "across_runs"] = Field(
        "per_run", description="per_run: every run draws its own prompts (salted by the run id), so no prompt "
        "cache carries over from an earlier run; across_runs: the same seed gives the same prompts (warm-cache "
        "studies)")
    cached_share_warning: Annotated[float, Field(ge=0, le=1)] | None = Field(
        0.2, description="warn when the server says it served more than this share of a phase's prompt tokens "
        "from its cache; raise it for workloads that share prefixes on purpose, null: never")
    sessions: Sessions | None = Field(None, description="multi-turn conversations (chat API); the load's "
                                      "requests then count conversations")
