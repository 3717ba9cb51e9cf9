"""Usage that counts more tokens than the stream carried chunks: the status goes by the usage (a server may put
several tokens in a chunk), and the phase says so in one line, with its widest case."""

from __future__ import annotations

from harness.config.scenario import SLO
from harness.stats.phase import PhaseFold
from harness.stats.summary import usage_warnings
from tests.helpers import rec


def _fold(*records: tuple[list[int], int | None]) -> PhaseFold:
    fold = PhaseFold(SLO())
    for k, (chunks, usage) in enumerate(records):
        fold.add(rec(0, 1, chunks, completion=usage, idx=k))
    return fold


def test_three_chunks_claiming_sixteen_tokens_are_said_with_the_widest_case() -> None:
    fold = _fold(([10, 20, 30], 16), ([10, 20, 30, 40], 9), ([10, 20], 2))
    (line,) = usage_warnings(fold)
    assert line.startswith("2 of 3 ok answers counted more tokens in their usage than chunks arrived")
    assert "up to 16 tokens in 3 chunks" in line and "continuous_usage" in line


def test_one_token_more_than_the_chunks_is_an_end_token_not_a_disagreement() -> None:
    assert usage_warnings(_fold(([10, 20, 30], 4), ([10, 20, 30], 3), ([10, 20], None))) == []


def test_per_chunk_counts_or_failed_answers_are_not_counted() -> None:
    exact = rec(0, 1, [10, 20, 30], completion=16)
    exact.chunk_tokens = [6, 5, 5]  # the server said each chunk's tokens: nothing is unexplained
    failed = rec(0, 1, [10], completion=16, status="bad_stream", idx=1)
    fold = PhaseFold(SLO())
    fold.add(exact)
    fold.add(failed)
    assert usage_warnings(fold) == []
