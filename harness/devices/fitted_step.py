"""A fitted twin's step, in the two parts `sim fit` measures: the decode part from a table of measured steps
by sequence count, and what the step's prompts cost beyond it (alone, grown by the other prompts in the step
and by the streams decoding beside them). Pure and shared, so the simulator prices a step
(`perfmodel.FittedModel`, one step at a time) by the very formula the fit and its checks apply to arrays of
measured steps (`twin_curve`, `twin_checks`). Numbers or numpy arrays alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

# A prompt's growth never takes its price below a tenth of alone (a fitted `together` may be negative:
# llama-server processed 8 prompts of 128 tokens faster per token than one)
GROWTH_FLOOR = 0.1


@overload
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: int) -> float: ...
@overload
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: NDArray[Any]) -> NDArray[np.float64]: ...
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: int | NDArray[Any]) -> float | NDArray[np.float64]:
    """The decode part of a step of `decoders` sequences: the table's n-th entry, `per_seq_ms` a sequence more
    past it, nothing when none decode."""
    if isinstance(decoders, int):  # one step, the simulator's: plain arithmetic, a hundred times numpy's speed
        if decoders <= 0:
            return 0.0
        return table[decoders - 1] if decoders <= len(table) else table[-1] + per_seq_ms * (decoders - len(table))
    steps = np.asarray(table, dtype=np.float64)
    n = decoders.astype(np.int64)
    inside = steps[np.clip(n, 1, len(steps)) - 1]
    return np.where(n <= 0, 0.0, np.where(n <= len(steps), inside, steps[-1] + per_seq_ms * (n - len(steps))))


@dataclass(frozen=True, slots=True)
class PromptPrice:
    """What a step's prompts cost beyond its decode part: a cost per step that has any, per 1,000 prompt
    tokens, and per (1,000 tokens)² of attention within the prompts (Σ q·(p + q/2) over their chunks of q
    tokens after p already processed: a long prompt costs more per token than a short one — llama-server on 2
    cores, 2.0 s per 1k at 128 tokens, 2.7 at 504); grown by `together` for each other prompt in the step and
    `beside` for each stream decoding beside them. `shared_step`: the cost per step is the step's own, paid by
    its decode part when streams decode beside the prompts (vLLM runs a step as one forward pass: on a CPU, a
    128-token prompt alone took 198 ms, beside decoding streams their step plus 150)."""

    step_ms: float = 0.0
    per_ktoken_ms: float = 0.0
    attn_ms: float = 0.0
    together: float = 0.0
    beside: float = 0.0
    shared_step: bool = False

    @overload
    def ms(self, prompt_k: float, prompts: int, decoders: int, attn_k2: float | None = None) -> float: ...
    @overload
    def ms(self, prompt_k: NDArray[Any], prompts: NDArray[Any] | float, decoders: NDArray[Any],
           attn_k2: NDArray[Any] | None = None) -> NDArray[np.float64]: ...
    def ms(self, prompt_k: float | NDArray[Any], prompts: int | float | NDArray[Any], decoders: int | NDArray[Any],
           attn_k2: float | NDArray[Any] | None = None) -> float | NDArray[np.float64]:
        """`prompts` prompts of `prompt_k` thousand tokens in all beside `decoders` decoding sequences;
        `attn_k2`: their attention in (1k tokens)², by default that of prompts of equal length with nothing
        cached."""
        if attn_k2 is None:
            attn_k2 = within_prompts(prompt_k, prompts)
        if isinstance(decoders, int) and isinstance(prompts, int):  # one step: as in table_ms
            own = 0.0 if self.shared_step and decoders > 0 else self.step_ms
            alone = own + self.per_ktoken_ms * prompt_k + self.attn_ms * attn_k2
            return alone * max(GROWTH_FLOOR, 1 + self.together * max(prompts - 1, 0) + self.beside * max(decoders, 0))
        step = np.where(np.asarray(decoders) > 0, 0.0, self.step_ms) if self.shared_step else self.step_ms
        alone = step + self.per_ktoken_ms * prompt_k + self.attn_ms * attn_k2
        grown = np.maximum(GROWTH_FLOOR, 1 + self.together * np.maximum(np.asarray(prompts, dtype=np.float64) - 1, 0)
                           + self.beside * np.maximum(np.asarray(decoders, dtype=np.float64), 0))
        return np.asarray(alone * grown, dtype=np.float64)


def within_prompts(prompt_k: Any, prompts: Any) -> Any:
    """The attention within `prompts` prompts of equal length, `prompt_k` thousand tokens in all, in (1k
    tokens)²: each of q tokens attends to the ones before it, q²/2."""
    return prompt_k * prompt_k / (2 * np.maximum(prompts, 1) if not isinstance(prompts, int) else 2 * max(prompts, 1))
