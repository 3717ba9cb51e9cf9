"""A decode step's time by the number of sequences it decodes, measured rather than assumed linear.

A CPU engine's step is not linear in its batch: llama.cpp on 2 cores (Gemma 3 270M) steps in 24 ms with one
sequence, 31 with two, 55 with three, 81 with four, 95 with five and 75 with eight (its matrix kernels change
with the batch), so no `step + per_seq · n` holds both a Poisson load's two or three streams and a closed
loop's eight. The table is the median decode-only step at each sequence count the runs saw often enough;
prompts cost a fixed time a step plus a time per token on top (`prompt_step_ms`, `per_ktoken_ms`), fitted
to the steps that processed prompts once the decode part is taken off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MIN_STEPS = 10  # decode-only steps at a sequence count for its median to enter the table
ONE_SIZE = 1.5  # prompt steps whose token counts all lie within this ratio: one size, no per-step cost told apart
MIN_OTHER_SIZE = 5  # prompt steps of another size it takes to tell them apart (two pairs decide nothing)


@dataclass(frozen=True)
class Curve:
    decode_ms: list[float]  # step time with n decoding sequences, n = 1 … len
    per_seq_ms: float  # past the table: this much a sequence more
    prompt_step_ms: float
    per_ktoken_ms: float  # per 1,000 prompt tokens
    seen: dict[int, float]  # batch sizes measured (not interpolated): the median context/1000 of their steps

    def departure(self, line: Callable[[int, float], float]) -> float:
        """The largest relative difference between the table and `line` (a linear model's decode step of n
        sequences holding a context of so many thousand tokens), over the batch sizes the runs measured."""
        return max(abs(self.decode_ms[n - 1] / line(n, ctx) - 1) for n, ctx in self.seen.items())

    def predict(self, decoders: np.ndarray, prompt_k: np.ndarray) -> np.ndarray:
        table = np.asarray(self.decode_ms)
        n = np.clip(decoders.astype(np.int64), 0, None)
        inside = table[np.clip(n, 1, len(table)) - 1]
        past = table[-1] + self.per_seq_ms * (n - len(table))
        decode = np.where(n == 0, 0.0, np.where(n <= len(table), inside, past))
        return decode + np.where(prompt_k > 0, self.prompt_step_ms + self.per_ktoken_ms * prompt_k, 0.0)


def fit_curve(samples: np.ndarray, prompt_steps: np.ndarray | None = None) -> Curve | None:
    """The table and the prompt terms, from rows [gap ms, sequences, context/1000, prompt tokens/1000, prompts
    in the step]; None when fewer than two sequence counts have `MIN_STEPS` decode-only steps. `prompt_steps`:
    rows of the server's own timing of its prompts, which then alone give the prompt terms (a stream's gap
    is given its step's prompts by when their first tokens came, which a late token can misplace)."""
    decoders = np.round(samples[:, 1] - samples[:, 4]).astype(np.int64)
    decode_only = samples[:, 3] == 0
    counts = np.arange(1, int(decoders[decode_only].max(initial=0)) + 1)
    medians = {int(n): float(np.median(samples[decode_only & (decoders == n), 0])) for n in counts
               if np.count_nonzero(decode_only & (decoders == n)) >= MIN_STEPS}
    if len(medians) < 2:
        return None
    seen = {n: float(np.median(samples[decode_only & (decoders == n), 2])) for n in medians}
    known = np.array(sorted(medians))
    values = np.array([medians[int(n)] for n in known])
    table = np.interp(np.arange(1, known[-1] + 1), known, values)  # counts seen too rarely: between neighbours
    slope = max(0.0, float(np.polyfit(known, values, 1)[0]))
    partial = Curve([float(v) for v in table], slope, 0.0, 0.0, seen)
    prompts = samples[samples[:, 3] > 0] if prompt_steps is None or not len(prompt_steps) else prompt_steps
    rest = prompts[:, 0] - partial.predict(np.round(prompts[:, 1] - prompts[:, 4]), np.zeros(len(prompts)))
    step, per_k = _prompt_terms(rest, prompts[:, 3])
    return Curve(partial.decode_ms, slope, step, per_k, seen)


def _prompt_terms(rest: np.ndarray, prompt_k: np.ndarray) -> tuple[float, float]:
    """rest ≈ step + per_k · prompt_k, least squares with neither below zero, once more without the rows more
    than five median deviations off (a stall in a prompt's step)."""
    if len(rest) == 0:
        return 0.0, 0.0
    if np.count_nonzero(prompt_k > ONE_SIZE * prompt_k.min()) < MIN_OTHER_SIZE:
        # (Nearly) every step held prompts of one size: their cost cannot be told per token from per step. Per
        # token, as a prompt's compute is (a batch of eight costs eight times one, not one step's cost).
        return 0.0, max(0.0, float(np.median(rest / prompt_k)))
    keep = np.ones(len(rest), dtype=bool)
    coef = np.zeros(2)
    for _ in range(2):
        x = np.column_stack([np.ones(int(keep.sum())), prompt_k[keep]])
        coef = np.linalg.lstsq(x, rest[keep], rcond=None)[0]
        if coef[0] < 0:
            coef = np.array([0.0, max(0.0, float(rest[keep] @ prompt_k[keep] / (prompt_k[keep] @ prompt_k[keep])))])
        elif coef[1] < 0:
            coef = np.array([max(0.0, float(np.mean(rest[keep]))), 0.0])
        residual = rest - (coef[0] + coef[1] * prompt_k)
        mad = max(float(np.median(np.abs(residual - np.median(residual)))), 1e-3 * float(np.median(np.abs(rest))))
        keep = np.abs(residual) <= 5 * mad
        if keep.sum() < 2:
            break
    return float(coef[0]), float(coef[1])
