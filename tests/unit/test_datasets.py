"""Datasets: ShareGPT multi-turn conversations and synthetic shared prefixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.client.aio import request_body
from harness.config.scenario import load_scenario, parse_scenario
from harness.errors import TraceError
from harness.tools.predict import predict
from harness.workload.datasets import sharegpt_turns
from harness.workload.plan import OpenLoopPlan, plan_phase

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "scenarios" / "data" / "sharegpt-sample.json"


def test_every_human_turn_is_a_request_carrying_its_history() -> None:
    turns = sharegpt_turns(str(SAMPLE))
    assert len(turns) == 5  # three in c1, one in c2, one in c3
    first, second, third = turns[:3]
    assert [role for role, _ in first.messages] == ["user"]
    assert [role for role, _ in third.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert third.messages[:2] == second.messages[:2]  # the history is the earlier turns, word for word
    assert first.reply_tokens == len(json.loads(SAMPLE.read_text())[0]["conversations"][1]["value"].split())
    system_turn = turns[3]
    assert system_turn.messages[0] == ("system", "You are a concise assistant.")


def test_sharegpt_scenario_sends_the_history_as_chat_messages() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "sharegpt.yaml")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan)
    specs = list(plan.specs)
    turns = sharegpt_turns(str(SAMPLE))
    assert specs[2].max_tokens == turns[2].reply_tokens  # output length: the recorded reply
    body = request_body(specs[2], "m", "chat")
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert specs[2].prompt_tokens == len(specs[2].prompt.split())
    assert specs[5].prompt == specs[0].prompt  # the dataset repeats when the phase asks for more


def test_sharegpt_scenario_predicts_end_to_end() -> None:
    summary = predict(load_scenario(ROOT / "scenarios" / "sharegpt.yaml"))
    assert summary.phases[0].requests.ok == 12


def test_shared_prefix_requests_share_one_of_n_system_prompts() -> None:
    scenario = load_scenario(ROOT / "scenarios" / "shared-prefix.yaml")
    plan = plan_phase(scenario, 0, "r")
    assert isinstance(plan, OpenLoopPlan)
    specs = list(plan.specs)[:12]
    systems = [s.messages[0][1] for s in specs if s.messages]
    assert len(set(systems)) == 4 and all(len(p.split()) == 2048 for p in systems)
    questions = {s.messages[1][1] for s in specs if s.messages}
    assert len(questions) == 12
    assert all(16 <= len(q.split()) <= 64 for q in questions)


def test_shared_prefix_cuts_ttft_compared_with_unique_prompts() -> None:
    shared = load_scenario(ROOT / "scenarios" / "shared-prefix.yaml")
    unique = parse_scenario({**shared.model_dump(mode="json"), "workload": {
        "output_tokens": 64, "prompt_tokens": 2088}}, "test")
    ttft_shared = predict(shared).to_json()["phases"][0]["latency_ms"]["ttft"]["mean"]
    ttft_unique = predict(unique).to_json()["phases"][0]["latency_ms"]["ttft"]["mean"]
    assert ttft_shared < ttft_unique / 2


def test_bad_sharegpt_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"conversations": [{"from": "human"}]}]')
    with pytest.raises(TraceError, match=rf"{path}: conversation 0, message 0: needs 'from' and 'value'"):
        sharegpt_turns(str(path))
