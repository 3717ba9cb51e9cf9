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
from dataclasses import dataclass, replace

import numpy as np

from harness.devices.fitted_step import PromptPrice, table_ms, within_prompts

MIN_STEPS = 10  # decode-only steps at a sequence count for its median to enter the table
ONE_SIZE = 1.5  # prompt steps whose token counts all lie within this ratio: one size, no per-step cost told apart
MIN_OTHER_SIZE = 5  # prompt steps of another size it takes to tell them apart (two pairs decide nothing)
ATTN_LENGTHS = 3  # prompt lengths it takes to tell a cost growing with a prompt's length from a line
MIN_ALONE = 5  # prompt steps alone, and beside streams, it takes to price a prompt apart from its company
# Steps of several prompts alone (each timed whole by the server) it takes to price prompts together; together
# they may also be cheaper than one prompt of their summed length (llama-server: 8 × 128 tokens in 2.5 s per
# 1k where one prompt took 3.0), down to 10% less per other prompt.
MIN_TOGETHER, TOGETHER_FLOOR = 3, -0.1


@dataclass(frozen=True)
class Curve:
    decode_ms: list[float]  # step time with n decoding sequences, n = 1 … len
    per_seq_ms: float  # past the table: this much a sequence more
    prompt_step_ms: float
    per_ktoken_ms: float  # per 1,000 prompt tokens
    seen: dict[int, float]  # batch sizes measured (not interpolated): the median context/1000 of their steps
    prompt_beside: float = 0.0  # the prompt part's growth for each sequence decoding beside it
    prompt_together: float = 0.0  # the prompt part's growth for each other prompt processed in the same step
    prompt_attn_ms: float = 0.0  # per (1k tokens)² of attention within the prompts
    prompt_step_shared: bool = False  # prompt_step_ms is paid by the decode part beside decoding streams

    def departure(self, line: Callable[[int, float], float]) -> float:
        """The largest relative difference between the table and `line` (a linear model's decode step of n
        sequences holding a context of so many thousand tokens), over the batch sizes the runs measured."""
        return max(abs(self.decode_ms[n - 1] / line(n, ctx) - 1) for n, ctx in self.seen.items())

    def predict(self, decoders: np.ndarray, prompt_k: np.ndarray, prompts: np.ndarray | float = 1.0) -> np.ndarray:
        n = np.clip(decoders.astype(np.int64), 0, None)
        return table_ms(self.decode_ms, self.per_seq_ms, n) + np.where(prompt_k > 0, self.prompt_part(
            prompt_k, prompts, n), 0.0)

    def prompt_part(self, prompt_k: np.ndarray, prompts: np.ndarray | float, beside: np.ndarray) -> np.ndarray:
        """What the prompts of a step cost beyond its decode part."""
        return PromptPrice(self.prompt_step_ms, self.per_ktoken_ms, self.prompt_attn_ms, self.prompt_together,
                           self.prompt_beside, self.prompt_step_shared).ms(prompt_k, prompts, beside)


def decoding(rows: np.ndarray) -> np.ndarray:
    """How many sequences decoded in each step row [gap ms, sequences, context/1000, prompt tokens/1000,
    prompts]: its sequences but its prompts."""
    counts: np.ndarray = np.round(rows[:, 1] - rows[:, 4]).astype(np.int64)
    return counts


def fit_curve(samples: np.ndarray, prompt_steps: np.ndarray | None = None) -> Curve | None:
    """The table and the prompt terms, from rows [gap ms, sequences, context/1000, prompt tokens/1000, prompts
    in the step]; None when fewer than two sequence counts have `MIN_STEPS` decode-only steps. `prompt_steps`:
    rows of the server's own timing of its prompts, which then alone give the prompt terms (a stream's gap
    is given its step's prompts by when their first tokens came, which a late token can misplace)."""
    decoders = decoding(samples)
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
    beside = decoding(prompts)
    rest = prompts[:, 0] - partial.predict(beside, np.zeros(len(prompts)))
    alone = beside == 0
    if np.count_nonzero(alone & (prompts[:, 4] == 1)) < MIN_ALONE:
        step, per_k, attn = _prompt_terms(rest, prompts[:, 3])
        return Curve(partial.decode_ms, slope, step, per_k, seen, prompt_attn_ms=attn)
    # A prompt beside decoding streams is slower than alone (llama-server: +10% a stream), and prompts
    # processed together may cost other than their prices alone: the terms from single prompts processed
    # alone, then each growth as the median over the steps that show it alone.
    single = alone & (prompts[:, 4] == 1)
    step, per_k, attn = _prompt_terms(rest[single], prompts[single, 3])
    terms = Curve(partial.decode_ms, slope, step, per_k, seen, prompt_attn_ms=attn)
    together = _growth(rest, terms.prompt_part(prompts[:, 3], prompts[:, 4], np.zeros(len(rest))), prompts[:, 4] - 1,
                       alone & ~single, MIN_TOGETHER, TOGETHER_FLOOR)
    terms = replace(terms, prompt_together=together, prompt_step_shared=_shared(rest, prompts, beside, terms))
    priced = terms.prompt_part(prompts[:, 3], prompts[:, 4], beside)
    beside_growth = _growth(rest, priced, beside, ~alone)
    return replace(terms, prompt_beside=beside_growth)


def _shared(rest: np.ndarray, prompts: np.ndarray, beside: np.ndarray, terms: Curve) -> bool:
    """Whether the prompts' cost per step is the step's own, which the decode part already paid where streams
    decoded beside them: the rule under which those steps' prompt parts lie closer to what they took. vLLM on
    a CPU (one forward pass a step) took a step of decodes plus 150 ms for a 128-token prompt that cost 198
    alone, its step cost 45; llama.cpp processes a prompt in ubatches of its own."""
    rows = beside > 0
    if np.count_nonzero(rows) < MIN_ALONE or terms.prompt_step_ms <= 0:
        return False
    charged = terms.prompt_part(prompts[rows, 3], prompts[rows, 4], np.zeros(np.count_nonzero(rows)))
    waived = charged - terms.prompt_step_ms
    return bool(np.median(np.abs(rest[rows] - waived)) < np.median(np.abs(rest[rows] - charged)))


def _growth(rest: np.ndarray, base: np.ndarray, count: np.ndarray, rows: np.ndarray, least: int = MIN_ALONE,
            floor: float = 0.0) -> float:
    """The median growth over `base` per unit of `count` over `rows`, at least `floor`; none with fewer than
    `least` rows."""
    if np.count_nonzero(rows) < least:
        return 0.0
    return max(floor, float(np.median((rest[rows] / np.maximum(base[rows], 1e-9) - 1) / count[rows])))


def _prompt_terms(rest: np.ndarray, prompt_k: np.ndarray) -> tuple[float, float, float]:
    """rest ≈ step + per_k · prompt_k + attn · prompt_k²/2 (single prompts), least squares with none below
    zero over each prompt length's median (weighted by its count: one late wake-up among three prompts of a
    length moves nothing), once more without the rows more than five median deviations off (a stall in a
    prompt's step). The attention term needs `ATTN_LENGTHS` lengths: through fewer, a line."""
    if len(rest) == 0:
        return 0.0, 0.0, 0.0
    if np.count_nonzero(prompt_k > ONE_SIZE * prompt_k.min()) < MIN_OTHER_SIZE:
        # (Nearly) every step held prompts of one size: their cost cannot be told per token from per step. Per
        # token, as a prompt's compute is (a batch of eight costs eight times one, not one step's cost).
        return 0.0, max(0.0, float(np.median(rest / prompt_k))), 0.0
    keep = np.ones(len(rest), dtype=bool)
    coef = np.zeros(3)
    for _ in range(2):
        k, y, w = _by_length(rest[keep], prompt_k[keep])
        terms = [np.ones(len(k)), k] + ([within_prompts(k, 1)] if len(k) >= ATTN_LENGTHS else [])
        coef[:] = 0.0
        coef[:len(terms)] = nonnegative(np.column_stack(terms) * w[:, None], y * w)
        residual = rest - (coef[0] + coef[1] * prompt_k + coef[2] * within_prompts(prompt_k, 1))
        mad = max(float(np.median(np.abs(residual - np.median(residual)))), 1e-3 * float(np.median(np.abs(rest))))
        keep = np.abs(residual) <= 5 * mad
        if keep.sum() < 2:
            break
    return float(coef[0]), float(coef[1]), float(coef[2])


def _by_length(rest: np.ndarray, prompt_k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct prompt length, the median of its rows, and the square root of their count (a weight)."""
    lengths, which, counts = np.unique(prompt_k, return_inverse=True, return_counts=True)
    medians = np.array([np.median(rest[which == i]) for i in range(len(lengths))])
    return lengths, medians, np.sqrt(counts.astype(np.float64))


def nonnegative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with no coefficient below zero (active set: drop the negative ones and refit)."""
    free = np.ones(x.shape[1], dtype=bool)
    coef = np.zeros(x.shape[1])
    for _ in range(x.shape[1]):
        coef[:] = 0.0
        coef[free] = np.linalg.lstsq(x[:, free], y, rcond=None)[0]
        if (coef >= 0).all():
            break
        free &= coef > 0
    return np.clip(coef, 0.0, None)
