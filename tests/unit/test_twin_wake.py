"""`engine-wakes-slow` (issue 44): a prompt that finds the engine idle is slower than one right after another —
named from the records, both ways: llama-server's +40% is named, a steady engine's few percent are not."""

from __future__ import annotations

from harness.records import RequestRecord
from harness.twin.wake import alone, wake_finding

MS = 1_000_000


def request(i: int, sent_ms: float, prompt_ms: float, tokens: int = 128, duration_ms: float = 800.0
            ) -> RequestRecord:
    sent = round(sent_ms * MS)
    return RequestRecord(f"r{i}", "p", i, tokens, 64, sent, sent_ns=sent, first_token_ns=sent + round(prompt_ms * MS),
                         end_ns=sent + round(duration_ms * MS), prompt_tokens=tokens, server_prompt_ms=prompt_ms)


def timeline(idle_ms: float, busy_ms: float) -> list[RequestRecord]:
    """Four prompts back to back (each sent 5 ms after the last ended), then four after 1.5 s of idling each, and
    two that overlap (neither alone)."""
    out, t = [], 1000.0
    for i in range(4):
        out.append(request(i, t, busy_ms))
        t += 805.0
    for i in range(4, 8):
        t += 1500.0
        out.append(request(i, t, idle_ms))
        t += 800.0
    out += [request(8, t + 2000, 999.0), request(9, t + 2100, 999.0)]
    return out


def test_prompts_alone_are_split_by_whether_the_engine_had_idled() -> None:
    idle, busy = alone(timeline(450.0, 270.0))
    assert idle == [450.0] * 4 + [999.0]  # the first of the overlapping pair found the engine idle; its partner not
    assert busy == [270.0] * 3  # the very first has no before: its engine's state unknown


def test_an_engine_slower_after_idling_is_named_and_a_steady_one_is_not() -> None:
    found = wake_finding(timeline(450.0, 270.0), 128)
    assert found is not None and found.code == "engine-wakes-slow"
    assert "took 450 ms after the engine idled 0.5 s or more (5 of them) and 270 ms right after another (3): +67%" \
        in found.text
    assert wake_finding(timeline(280.0, 270.0)[:8], 128) is None  # +4%: within noise
    assert wake_finding(timeline(450.0, 270.0), 512) is None  # no prompts of that length
    assert wake_finding(timeline(450.0, 270.0)[:5], 128) is None  # one idle prompt: too few to say
