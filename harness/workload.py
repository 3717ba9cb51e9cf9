"""What each request asks for: prompt text, its length and the output length, seeded and pure."""

from __future__ import annotations

from collections.abc import Iterator
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


@dataclass(frozen=True, slots=True)
class RequestSource:
    """The requests of one phase, by index: request i is the same whoever asks and however many follow.

    Each phase gets its own prompts (no accidental prefix-cache hits between phases).
    """

    workload: Workload
    phase: str
    phase_index: int
    seed: int
    run_id: str
    batch_size: int | None = None

    def spec(self, i: int) -> RequestSpec:
        prompt_seed = int(np.random.SeedSequence([self.seed, self.phase_index, i]).generate_state(1)[0])
        w = self.workload
        return RequestSpec(
            request_id=f"{self.run_id}-{self.phase_index}-{i}",
            phase=self.phase,
            index=i,
            prompt=make_text(w.prompt_tokens, prompt_seed),
            prompt_tokens=w.prompt_tokens,
            max_tokens=w.output_tokens,
            ignore_eos=w.ignore_eos,
            batch=None if self.batch_size is None else i // self.batch_size,
        )

    def take(self, count: int) -> list[RequestSpec]:
        return [self.spec(i) for i in range(count)]

    def stream(self, count: int | None = None) -> Iterator[RequestSpec]:
        """Specs in order, `count` of them or without end."""
        i = 0
        while count is None or i < count:
            yield self.spec(i)
            i += 1


def build_requests(
    workload: Workload, phase: str, phase_index: int, count: int, seed: int, run_id: str,
    batch_size: int | None = None,
) -> list[RequestSpec]:
    return RequestSource(workload, phase, phase_index, seed, run_id, batch_size).take(count)
