"""Multi-turn sessions in a phase: how many conversations, and TTFT by turn (later turns carry longer
histories, so their first token comes later)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.records import RequestRecord
from harness.stats.metrics import distribution, ttft_ns
from harness.stats.schema import SessionStats


def session_stats(records: Sequence[RequestRecord]) -> SessionStats | None:
    turns = [r for r in records if r.turn is not None]
    if not turns:
        return None
    by_turn: dict[int, list[RequestRecord]] = {}
    for rec in turns:
        by_turn.setdefault(rec.turn or 0, []).append(rec)
    ttft = {str(k): distribution([v for r in recs if r.status == "ok" and (v := ttft_ns(r)) is not None])
            for k, recs in sorted(by_turn.items())}
    prompt = {str(k): sum(r.prompt_tokens_requested for r in recs) / len(recs) for k, recs in sorted(by_turn.items())}
    return SessionStats(conversations=len({r.session for r in turns}), turns=len(turns),
                        turns_per_conversation_max=max(by_turn) + 1, ttft_by_turn_ms=ttft,
                        prompt_tokens_by_turn_mean=prompt)
