"""A device known by what was measured of it, not by its datasheet: the step-time model `harness sim fit` and
`harness sim twin` fit to an endpoint, priced by one formula for the simulator and the fit (`fitted_step`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.devices.fitted_step import PromptPrice, table_ms
from harness.devices.models import ModelSpec
from harness.devices.step import FULL, Budget, PerformanceModel, Serving, StepCost, StepLoad


@dataclass(frozen=True, slots=True)
class FittedAccelerator:
    """A step-time model fitted to a measured endpoint (`harness sim fit`): a step costs a fixed time, a time
    per running sequence and per 1,000 tokens of context its decodes read, and the roofline blend of reading
    the weights and computing its tokens: hypot(weights_ms, per_ktoken_ms · tokens / 1000)."""

    name: str
    step_ms: float
    weights_ms: float
    per_ktoken_ms: float  # compute per 1,000 tokens in the step (decodes and prompt tokens)
    per_seq_ms: float
    per_context_ktoken_ms: float  # per 1,000 tokens of decode context
    kv_tokens: int  # KV cache capacity, in tokens
    # Time of each request outside the engine's steps (HTTP, parsing, tokenising, the server's loop), part of
    # every measured TTFT, added before the request reaches the engine: by virtual-time replays (`predict`,
    # `sim validate`) and by `sim serve --presets` alike.
    request_ms: float = 0.0
    # The engine's shape, where it is not vLLM's: how many requests it decodes at once (llama-server's slots,
    # `-np`; beyond them a request waits for one), how many tokens one step processes at most (its `n_batch`:
    # a prompt is processed in chunks of it, inside the steps the running streams decode in), and whether a
    # new request's first token leaves one step after the step that processed its prompt (llama.cpp: 1; vLLM:
    # 0).
    slots: int | None = None
    batch_tokens: int | None = None
    first_token_step: int = 0
    # Whether an arrival during a busy step waits for the step after next (vLLM's async scheduling, on by
    # default on GPUs; vLLM-CPU turns it off, llama.cpp has none): chosen by `sim twin` from its fitted
    # Poisson load, where the two rules differ by a step's time in every TTFT. None: the simulator's own
    # setting.
    async_scheduling: bool | None = None
    prompt_step_ms: float = 0.0  # a step that processes prompt tokens costs this much more (its own setup)
    # Decode tables only (devices/fitted_step.py): a prompt beside decoding streams costs this fraction more
    # for each (llama-server on a CPU: 2.2 s per 1k alone, ~3.5 beside six streams), this more for each other
    # prompt in the step, and this much per (1,000 tokens)² of attention within prompts (Σ q·(p + q/2) over
    # their chunks)
    prompt_beside: float = 0.0
    prompt_together: float = 0.0
    prompt_attn_ms: float = 0.0
    # Whether prompt_step_ms is the step's own cost, paid by the decode part when streams decode beside the
    # prompts (vLLM: one forward pass a step); else a prompt's own setup on top of it (llama.cpp's prompt
    # ubatches)
    prompt_step_shared: bool = False
    # Where the decode step's time is not linear in its sequences (a CPU's kernels change with the batch; CUDA
    # graphs come in batch-size buckets), the measured time of a step of n decoding sequences, n = 1, 2, …; a
    # step then costs decode_ms[n − 1] (per_seq_ms a sequence more past the table) + prompt_step_ms +
    # per_ktoken_ms per 1,000 prompt tokens + per_context_ktoken_ms per 1,000 context tokens.
    decode_ms: list[float] | None = None
    # The loads the fit saw, offered requests per second (lowest, highest): `sim validate` says when one is
    # beyond.
    fitted_rps: list[float] | None = None  # [lowest, highest]
    # The rest of the envelope it was fitted on: the decode batch sizes its steps measured (each in enough
    # steps to time), the prompt lengths its requests had; `predict` and `sim validate` say when a load leaves
    # them.
    fitted_batch: list[int] | None = None  # [lowest, highest] sequences decoding in a step
    fitted_prompt_tokens: list[int] | None = None  # [shortest, longest]

    @property
    def prompt_price(self) -> PromptPrice:
        return PromptPrice(self.prompt_step_ms, self.per_ktoken_ms, self.prompt_attn_ms, self.prompt_together,
                           self.prompt_beside, self.prompt_step_shared)

    def prompt_ms(self, prompt_k: NDArray[Any], prompts: NDArray[Any], decoders: NDArray[Any]) -> NDArray[np.float64]:
        """What the prompts of measured steps (`prompts` of `prompt_k` thousand tokens in all, beside
        `decoders` sequences decoding) cost beyond their decode part, priced as the simulator prices a
        step."""
        return self.prompt_price.ms(prompt_k, prompts, decoders)

    def line_decode_ms(self, seqs: int, context_tokens: float) -> float:
        """The linear step model's time for `seqs` sequences decoding and nothing else (`sim fit` sets it
        beside the measured steps to decide whether a table is needed)."""
        return (self.step_ms + self.per_seq_ms * seqs + self.per_context_ktoken_ms * context_tokens / 1e3
                + math.hypot(self.weights_ms, self.per_ktoken_ms * seqs / 1e3))

    # What every device answers (devices/device.py)
    unit = "endpoint"
    splits_heads = False
    bf16_flops = None  # fitted to times, not to a device's limits
    board_w = None  # an endpoint, not a board

    @property
    def request_s(self) -> float:
        return self.request_ms / 1e3

    @property
    def kv_limit(self) -> int:
        return self.kv_tokens  # its endpoint started with no more context than this

    @property
    def twin(self) -> FittedAccelerator:
        return self

    def device_counts(self) -> tuple[int, ...]:
        return (1, 2, 4, 8)

    def batch_defaults(self) -> tuple[int, int]:
        return self.slots or 1024, self.batch_tokens or 8192

    def graph_largest(self, max_num_seqs: int) -> int:
        return 0  # measured as it ran: no padding to model

    def link_text(self, tp: int) -> str:
        return "-"

    def allreduce(self, tp: int) -> str:
        return "-"

    def law(self, model: ModelSpec, serving: Serving) -> PerformanceModel:
        return FittedModel(self)  # its KV capacity measured, whatever the cache's type


@dataclass(frozen=True, slots=True)
class FittedModel:
    """A step-time model fitted to a measured endpoint (`harness sim fit`): linear in what a step does."""

    accelerator: FittedAccelerator
    peaks = None  # fitted to times, not to a device's limits

    def step_cost(self, load: StepLoad) -> StepCost:
        return StepCost(self.step_seconds(load))

    def step_seconds(self, load: StepLoad) -> float:
        a = self.accelerator
        if a.decode_ms:
            prompts = load.tokens - load.decodes
            # A first token held for this step leaves with the others' tokens at no cost of its own:
            # llama-server alone sends it ~7 ms after its prompt's step, with others one step later.
            prompt = (a.prompt_price.ms(prompts / 1e3, load.seqs - load.decodes, load.decodes,
                                        load.prefill_attn / 1e6) if prompts > 0 else 0.0)
            return (table_ms(a.decode_ms, a.per_seq_ms, load.decodes) + prompt
                    + a.per_context_ktoken_ms * load.decode_context / 1e3) / 1e3
        return (a.step_ms + a.per_seq_ms * load.seqs + a.per_context_ktoken_ms * load.decode_context / 1e3
                + (a.prompt_step_ms if load.prefill_attn > 0 else 0.0)
                + math.hypot(a.weights_ms, a.per_ktoken_ms * load.tokens / 1e3)) / 1e3

    def kv_capacity_tokens(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> int:
        return self.accelerator.kv_tokens  # as measured, at the utilisation the endpoint ran with

    def memory(self, gpu_memory_utilization: float = 0.9, budget: Budget = FULL) -> tuple[float, float]:
        return 0.0, math.inf  # a measured endpoint: it started, its weights fitted
