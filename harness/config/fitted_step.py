"""A fitted twin's step, in the two parts `sim fit` measures: the decode part from a table of measured steps by
sequence count, and what the step's prompts cost beyond it (alone, grown by the other prompts in the step and by
the streams decoding beside them). Pure and shared, so the simulator prices a step (`perfmodel.FittedModel`, one
step at a time) by the very formula the fit and its checks apply to arrays of measured steps (`twin_curve`,
`twin_checks`). Numbers or numpy arrays alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

# A prompt's growth never takes its price below a tenth of alone (a fitted `together` may be negative: llama-server
# processed 8 prompts of 128 tokens faster per token than one)
GROWTH_FLOOR = 0.1


@overload
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: int) -> float: ...
@overload
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: NDArray[Any]) -> NDArray[np.float64]: ...
def table_ms(table: Sequence[float], per_seq_ms: float, decoders: int | NDArray[Any]) -> float | NDArray[np.float64]:
    """The decode part of a step of `decoders` sequences: the table's n-th entry, `per_seq_ms` a sequence more past
    it, nothing when none decode."""
    if isinstance(decoders, int):  # one step, the simulator's: plain arithmetic, a hundred times numpy's speed
        if decoders <= 0:
            return 0.0
        return table[decoders - 1] if decoders <= len(table) else table[-1] + per_seq_ms * (decoders - len(table))
    steps = np.asarray(table, dtype=np.float64)
    n = decoders.astype(np.int64)
    inside = steps[np.clip(n, 1, len(steps)) - 1]
    return np.where(n <= 0, 0.0, np.where(n <= len(steps), inside, steps[-1] + per_seq_ms * (n - len(steps))))


@overload
def prompt_part_ms(prompt_step_ms: float, per_ktoken_ms: float, together: float, beside: float, prompt_k: float,
                   prompts: int, decoders: int) -> float: ...
@overload
def prompt_part_ms(prompt_step_ms: float, per_ktoken_ms: float, together: float, beside: float,
                   prompt_k: NDArray[Any], prompts: NDArray[Any] | float, decoders: NDArray[Any]
                   ) -> NDArray[np.float64]: ...
def prompt_part_ms(prompt_step_ms: float, per_ktoken_ms: float, together: float, beside: float,
                   prompt_k: float | NDArray[Any], prompts: int | float | NDArray[Any],
                   decoders: int | NDArray[Any]) -> float | NDArray[np.float64]:
    """What `prompts` prompts of `prompt_k` thousand tokens in all cost in a step beside `decoders` decoding
    sequences: their price alone, grown by `together` for each other prompt and `beside` for each stream."""
    alone = prompt_step_ms + per_ktoken_ms * prompt_k
    if isinstance(decoders, int) and isinstance(prompts, int):  # one step: as above
        return alone * max(GROWTH_FLOOR, 1 + together * max(prompts - 1, 0) + beside * max(decoders, 0))
    grown = np.maximum(GROWTH_FLOOR, 1 + together * np.maximum(np.asarray(prompts, dtype=np.float64) - 1, 0)
                       + beside * np.maximum(np.asarray(decoders, dtype=np.float64), 0))
    return np.asarray(alone * grown, dtype=np.float64)
