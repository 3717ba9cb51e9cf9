"""What each request asks for: prompt text, its length and the output length, seeded and pure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.scenario import Workload
from harness.tokens import make_text


@dataclass(frozen=True, slots=True)
class RequestSpec:
    request_id: str
    phase: str
    index: int
    prompt: str
    prompt_tokens: int
    max_tokens: int
    ignore_eos: bool
    batch: int | None = None


def build_requests(
    workload: Workload, phase: str, phase_index: int, count: int, seed: int, run_id: str,
    batch_size: int | None = None,
) -> list[RequestSpec]:
    """`count` requests for one phase. Each phase gets its own prompts (no accidental cache hits)."""
    seeds = np.random.SeedSequence([seed, phase_index]).generate_state(count)
    return [
        RequestSpec(
            request_id=f"{run_id}-{phase_index}-{i}",
            phase=phase,
            index=i,
            prompt=make_text(workload.prompt_tokens, int(seeds[i])),
            prompt_tokens=workload.prompt_tokens,
            max_tokens=workload.output_tokens,
            ignore_eos=workload.ignore_eos,
            batch=None if batch_size is None else i // batch_size,
        )
        for i in range(count)
    ]
