"""A workload against a model whose context the model list gives: refused when no request can fit, warned of
when the longest may not."""

from __future__ import annotations

import pytest

from harness.config.workload import LengthDist, Workload
from harness.errors import UsageError
from harness.run.target import fits, high, low
from harness.voice import Heard


def _workload(prompt: object, output: object) -> Workload:
    return Workload.model_validate({"prompt_tokens": prompt, "output_tokens": output})


def test_bounds_of_each_kind_of_length() -> None:
    assert (low(300), high(300)) == (300, 300)
    fixed = LengthDist(dist="fixed", value=500, max=400)
    assert (low(fixed), high(fixed)) == (400, 400)  # clamped, as drawn
    uniform = LengthDist(dist="uniform", min=10, max=90)
    assert (low(uniform), high(uniform)) == (10, 90)
    normal = LengthDist(dist="normal", mean=100, std=10)
    assert (low(normal), high(normal)) == (1, None)


def test_no_request_can_fit_is_refused_naming_the_fields_and_the_context() -> None:
    with pytest.raises(UsageError, match=r"at least 200,000 tokens after a prompt of at least 256, past m's context "
                                         r"of 131,072 .*workload.output_tokens"):
        fits(_workload(256, 200_000), "m", 131_072, None)


def test_only_the_longest_passing_is_a_warning_and_a_fitting_workload_is_silent() -> None:
    said: list[str] = []
    fits(_workload(1000, {"dist": "uniform", "min": 10, "max": 4000}), "m", 4096, Heard(warned=said))
    assert len(said) == 1 and "up to 1,000 prompt and 4,000 answer tokens pass m's context of 4,096" in said[0]
    fits(_workload(1000, {"dist": "uniform", "min": 10, "max": 3000}), "m", 4096, Heard(warned=said))
    # unbounded: unknown
    fits(_workload(1000, {"dist": "normal", "mean": 3000, "std": 900}), "m", 4096, Heard(warned=said))
    assert len(said) == 1
