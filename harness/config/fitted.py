"""A device known by what was measured of it, not by its datasheet: the step-time model `harness sim fit` and
`harness sim twin` fit to an endpoint, priced by one formula for the simulator and the fit (`fitted_step`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from harness.config.fitted_step import PromptPrice


@dataclass(frozen=True, slots=True)
class FittedAccelerator:
    """A step-time model fitted to a measured endpoint (`harness sim fit`): a step costs a fixed time, a time per
    running sequence and per 1,000 tokens of context its decodes read, and the roofline blend of reading the
    weights and computing its tokens: hypot(weights_ms, per_ktoken_ms · tokens / 1000)."""

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
    # a prompt is processed in chunks of it, inside the steps the running streams decode in), and whether a new
    # request's first token leaves one step after the step that processed its prompt (llama.cpp: 1; vLLM: 0).
    slots: int | None = None
    batch_tokens: int | None = None
    first_token_step: int = 0
    # Whether an arrival during a busy step waits for the step after next (vLLM's async scheduling, on by default
    # on GPUs; vLLM-CPU turns it off, llama.cpp has none): chosen by `sim twin` from its fitted Poisson load, where
    # the two rules differ by a step's time in every TTFT. None: the simulator's own setting.
    async_scheduling: bool | None = None
    prompt_step_ms: float = 0.0  # a step that processes prompt tokens costs this much more (its own setup)
    # Decode tables only (config/fitted_step.py): a prompt beside decoding streams costs this fraction more for each
    # (llama-server on a CPU: 2.2 s per 1k alone, ~3.5 beside six streams), this more for each other prompt in the
    # step, and this much per (1,000 tokens)² of attention within prompts (Σ q·(p + q/2) over their chunks)
    prompt_beside: float = 0.0
    prompt_together: float = 0.0
    prompt_attn_ms: float = 0.0
    # Whether prompt_step_ms is the step's own cost, paid by the decode part when streams decode beside the prompts
    # (vLLM: one forward pass a step); else a prompt's own setup on top of it (llama.cpp's prompt ubatches)
    prompt_step_shared: bool = False
    # Where the decode step's time is not linear in its sequences (a CPU's kernels change with the batch; CUDA
    # graphs come in batch-size buckets), the measured time of a step of n decoding sequences, n = 1, 2, …; a
    # step then costs decode_ms[n − 1] (per_seq_ms a sequence more past the table) + prompt_step_ms +
    # per_ktoken_ms per 1,000 prompt tokens + per_context_ktoken_ms per 1,000 context tokens.
    decode_ms: list[float] | None = None
    # The loads the fit saw, offered requests per second (lowest, highest): `sim validate` says when one is beyond.
    fitted_rps: list[float] | None = None  # [lowest, highest]
    # The rest of the envelope it was fitted on: the decode batch sizes its steps measured (each in enough steps
    # to time), the prompt lengths its requests had; `predict` and `sim validate` say when a load leaves them.
    fitted_batch: list[int] | None = None  # [lowest, highest] sequences decoding in a step
    fitted_prompt_tokens: list[int] | None = None  # [shortest, longest]

    @property
    def prompt_price(self) -> PromptPrice:
        return PromptPrice(self.prompt_step_ms, self.per_ktoken_ms, self.prompt_attn_ms, self.prompt_together,
                           self.prompt_beside, self.prompt_step_shared)

    def prompt_ms(self, prompt_k: NDArray[Any], prompts: NDArray[Any], decoders: NDArray[Any]) -> NDArray[np.float64]:
        """What the prompts of measured steps (`prompts` of `prompt_k` thousand tokens in all, beside `decoders`
        sequences decoding) cost beyond their decode part, priced as the simulator prices a step."""
        return self.prompt_price.ms(prompt_k, prompts, decoders)

    def line_decode_ms(self, seqs: int, context_tokens: float) -> float:
        """The linear step model's time for `seqs` sequences decoding and nothing else (`sim fit` sets it beside
        the measured steps to decide whether a table is needed)."""
        return (self.step_ms + self.per_seq_ms * seqs + self.per_context_ktoken_ms * context_tokens / 1e3
                + math.hypot(self.weights_ms, self.per_ktoken_ms * seqs / 1e3))
