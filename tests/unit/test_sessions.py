"""Multi-turn sessions, without a network: conversations, think times, trace sessions, validation."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config.scenario import parse_scenario
from harness.config.workload import Sessions, ThinkTime, Workload
from harness.errors import ScenarioError
from harness.workload.requests import RequestSource
from harness.workload.sessions import ConversationSource, group_sessions, new_tokens
from harness.workload.traces import TraceRow


def source(sessions: Sessions, run_id: str = "r1") -> ConversationSource:
    workload = Workload(prompt_tokens=10, output_tokens=5, sessions=sessions)
    return ConversationSource(RequestSource(workload, "p", 0, 42, run_id), sessions)


def test_a_conversation_is_the_same_whoever_asks_and_new_in_every_run() -> None:
    talk = source(Sessions(turns=3))
    first = talk.conversation(2)
    assert first == talk.conversation(2) and len(first.turns) == 3
    assert all(len(a.text.split()) == 10 for a in first.turns[1:]) and len(first.turns[0].text.split()) == 14
    assert first.turns[0].text != source(Sessions(turns=3), run_id="r2").conversation(2).turns[0].text


def test_a_turn_carries_its_history_and_its_place() -> None:
    talk = source(Sessions(turns=2))
    conv = talk.conversation(0)
    history = (("user", conv.turns[0].text), ("assistant", " six words of a real answer"))
    spec = talk.spec(conv, 1, history)
    assert spec.messages == (*history, ("user", conv.turns[1].text))
    assert spec.prompt_tokens == 14 + 6 + 10 and spec.turn == 1 and spec.index == 1
    assert spec.session == conv.session and spec.max_tokens == conv.turns[1].max_tokens


@pytest.mark.parametrize(("think", "mean_s"), [
    (0.25, 0.25),
    (ThinkTime(dist="fixed", value_s=0.5), 0.5),
    (ThinkTime(dist="exponential", mean_s=2.0), 2.0),
    (ThinkTime(dist="uniform", min_s=1.0, max_s=3.0), 2.0),
    (ThinkTime(dist="lognormal", median_s=1.0, sigma=0.5), float(np.exp(0.125))),
])
def test_think_times_are_seeded_and_have_their_mean(think: float | ThinkTime, mean_s: float) -> None:
    talk = source(Sessions(turns=2, think_s=think))
    draws = np.array([talk.think_ns(i, 1) for i in range(4000)]) / 1e9
    assert draws.mean() == pytest.approx(mean_s, rel=0.06)
    assert talk.think_ns(7, 1) == talk.think_ns(7, 1)


def test_trace_sessions_group_rows_and_count_only_the_new_tokens() -> None:
    rows = [TraceRow(0.0, 100, 20, session="a"), TraceRow(0.5, 50, 5, session="b"),
            TraceRow(2.0, 150, 30, session="a"), TraceRow(4.0, 400, 10, session="a")]
    groups = group_sessions(rows)
    assert [len(g) for g in groups] == [3, 1] and groups[0][0].session == "a"
    assert [new_tokens(groups[0], k) for k in range(3)] == [100, 30, 220]


def test_sessions_need_an_open_loop_load() -> None:
    with pytest.raises(ScenarioError, match=r"workload\.sessions start conversations open-loop: phase b"):
        parse_scenario({"name": "s", "workload": {"sessions": {"turns": 2}},
                        "phases": [{"name": "b", "load": {"type": "batch", "size": 4}}]}, "test")
    with pytest.raises(ScenarioError, match="'exponential' needs 'mean_s'"):
        parse_scenario({"name": "s", "workload": {"sessions": {"think_s": {"dist": "exponential"}}},
                        "phases": [{"name": "p", "load": {"type": "poisson", "rate": 1, "requests": 2}}]}, "test")


def test_a_trace_with_a_session_column_replays_as_conversations() -> None:
    from harness.config.scenario import load_scenario
    from harness.tools.predict import predict
    from tests.helpers import ROOT

    base = load_scenario(ROOT / "scenarios" / "generic-trace.yaml")
    rows = [line for line in (ROOT / "scenarios" / "data" / "generic-sample.jsonl").read_text().splitlines() if line]
    conversations = {line.split('"conversation": "')[1].split('"')[0] for line in rows}
    talk = base.model_copy(update={"workload": Workload(sessions=Sessions(think_s=0.1))})
    (phase,) = predict(talk).to_json()["phases"]
    assert phase["sessions"]["conversations"] == len(conversations)
    assert phase["sessions"]["turns"] == phase["requests"]["ok"] == len(rows)
