"""Whether a fitted twin's shape is one an engine can have, each failure a named finding (`harness sim twin`).

A fit on loads that rarely reach high batch sizes once gave decode steps of [15.5, 34.6, 58.3, 73.0, 74.9,
116.0] ms for 1–6 sequences (issue 44): a step of six costing more than six steps of one, which no engine does
(a batch shares the weights' read). Its errors then showed only on loads it was not fitted on. The checks:

- `decode-superlinear`: a step of n sequences costs more than n steps of one, beyond 15%, where no clean
  measurement of that batch size (a closed loop of n) confirms it;
- `decode-nonmonotonic`: a step of more sequences is faster than one of fewer by more than 15% and three
  standard errors of the two medians, where clean measurements of both sizes do not confirm it (llama.cpp's
  even batches tile 10–18% better: a closed loop of three steps in 54 ms, of four in 44);
- `decode-spread`: at one batch size the steps spread widely (interquartile range over 40% of the median): the
  step depends on something no client sees (llama.cpp's KV cache per slot: which slots are busy);
- `prompt-cost-by-load`: what prompts took over the twin's price of them differs between the fitted runs by
  over 30% (the twin prices a prompt alone, together with others and beside decoding streams; a cost that
  moves otherwise with the load is not in it).

Rows are `twin_samples` rows: [step ms, sequences, context/1000, prompt tokens/1000, prompts in the step].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from harness.devices.fitted import FittedAccelerator
from harness.devices.fitted_step import table_ms
from harness.twin.curve import MIN_STEPS, decoding

SUPERLINEAR = 1.15
DIP = 0.15
SPREAD = 0.40
PROMPT_SPREAD = 1.30
MIN_PROMPT_STEPS = 5


@dataclass(frozen=True)
class Finding:
    code: str
    text: str

    def __str__(self) -> str:
        return f"{self.code}: {self.text}"


def decode_ms(a: FittedAccelerator, seqs: np.ndarray, context_k: np.ndarray) -> np.ndarray:
    """The twin's decode part of a step of `seqs` sequences (no prompt in it)."""
    if a.decode_ms:
        return table_ms(a.decode_ms, a.per_seq_ms, seqs)
    line: np.ndarray = (a.step_ms + a.per_seq_ms * seqs + a.per_context_ktoken_ms * context_k
                        + np.hypot(a.weights_ms, a.per_ktoken_ms * seqs / 1e3))
    return line


def _by_size(rows: np.ndarray) -> dict[int, np.ndarray]:
    """Decode-only step times by the sequences they decoded, where there are enough of them."""
    plain = rows[rows[:, 3] == 0]
    n = decoding(plain)
    return {int(k): plain[n == k, 0] for k in np.unique(n) if k > 0 and np.count_nonzero(n == k) >= MIN_STEPS}


def _median_se(gaps: np.ndarray) -> float:
    mad = float(np.median(np.abs(gaps - np.median(gaps))))
    return float(1.253 * 1.4826 * mad / np.sqrt(len(gaps)))


def confirmed(rows: np.ndarray, size: int) -> float | None:
    """The median decode-only step of exactly `size` sequences in `rows` (a closed loop of `size` users: clean
    decode steps), where there are enough of them."""
    return float(np.median(g)) if (g := _by_size(rows).get(size)) is not None else None


def decode_findings(a: FittedAccelerator, rows: np.ndarray, clean: Mapping[int, float] | None = None
                    ) -> list[Finding]:
    """`clean`: decode steps measured with nothing else in them, by batch size (`sim twin`'s ramp): a table
    entry within 15% of one is the engine's, however it rises (llama-server on 2 cores: 15 ms for one
    sequence, 55 for three — its kernels change with the batch)."""
    out: list[Finding] = []
    clean = clean or {}
    sizes = np.arange(1, (len(a.decode_ms) if a.decode_ms else 1) + 9)
    steps = decode_ms(a, sizes.astype(np.float64), np.zeros(len(sizes)))
    over = [int(n) for n, t in zip(sizes, steps, strict=True) if n > 1 and t > SUPERLINEAR * n * steps[0]
            and not (int(n) in clean and abs(t / clean[int(n)] - 1) <= DIP)]
    if over:
        n = over[0]
        out.append(Finding("decode-superlinear", f"a decode step of {n} sequences costs {steps[n - 1]:,.1f} ms, more "
                           f"than {n} steps of one ({n} × {steps[0]:,.1f} ms): no engine's batch costs more than its "
                           "requests alone; the fitted loads mixed prompt work into the decode steps or reached this "
                           "batch size too rarely"))
    seen = _by_size(rows)
    medians = {n: float(np.median(g)) for n, g in seen.items()}
    for n in sorted(medians):
        for m in (k for k in sorted(medians) if k < n and not _both_clean(clean, medians, k, n)):
            drop = 1 - medians[n] / medians[m]
            noise = 3 * np.hypot(_median_se(seen[n]), _median_se(seen[m])) / medians[m]
            if drop > max(DIP, noise):
                out.append(Finding("decode-nonmonotonic", f"decode steps of {n} sequences ({medians[n]:,.1f} ms) are "
                                   f"{drop:.0%} faster than of {m} ({medians[m]:,.1f} ms), beyond noise"))
                break
        else:
            continue
        break
    for n, gaps in sorted(seen.items()):
        q1, q3 = np.percentile(gaps, [25, 75])
        if (q3 - q1) > SPREAD * medians[n]:
            out.append(Finding("decode-spread", f"decode steps of {n} sequences vary {q1:,.1f}–{q3:,.1f} ms (middle "
                               f"half) around {medians[n]:,.1f}: the step depends on something no client sees (which "
                               "slots are busy, with llama-server's KV cache per slot?); the twin takes the median"))
            break
    return out


def _both_clean(clean: Mapping[int, float], medians: Mapping[int, float], *sizes: int) -> bool:
    """Whether clean measurements of every batch size given agree with the fitted runs' medians (within
    15%)."""
    return all(n in clean and abs(medians[n] / clean[n] - 1) <= DIP for n in sizes)


def prompt_ratio(a: FittedAccelerator, rows: np.ndarray) -> float | None:
    """What the steps that held prompts took beyond the twin's decode part, over the twin's price of their
    prompts (the median); None with fewer than `MIN_PROMPT_STEPS` of them."""
    held = rows[(rows[:, 3] > 0)]
    if len(held) < MIN_PROMPT_STEPS:
        return None
    n = decoding(held)
    rest = held[:, 0] - decode_ms(a, n.astype(np.float64), held[:, 2]) * (n > 0)
    return float(np.median(np.clip(rest, 0.0, None) / np.maximum(a.prompt_ms(held[:, 3], held[:, 4], n), 1e-9)))


def prompt_findings(a: FittedAccelerator, rows_by_run: Mapping[str, np.ndarray]) -> list[Finding]:
    ratios = {run: r for run, rows in rows_by_run.items() if (r := prompt_ratio(a, rows)) is not None and r > 0}
    if len(ratios) < 2:
        return []
    low, high = min(ratios, key=ratios.__getitem__), max(ratios, key=ratios.__getitem__)
    if ratios[high] <= PROMPT_SPREAD * ratios[low]:
        return []
    return [Finding("prompt-cost-by-load", f"prompts took {ratios[low]:.2f}× the twin's price in {low} and "
                    f"{ratios[high]:.2f}× in {high}: the engine processes prompts at a cost the twin's terms (alone, "
                    "together, beside decoding streams) do not follow")]
