"""Multi-turn sessions over real HTTP: each turn leaves when the previous answer has ended plus the think
time, carrying the answer the server really gave; conversations arrive open-loop."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from harness.client.backend import Endpoint
from harness.clock import NS_PER_MS
from harness.config.scenario import parse_scenario
from harness.run.runner import run_scenario
from tests.helpers import ROOT, USAGE, chunk, harness


class Echo:
    """Answers every chat request with three words naming the request, and keeps every body it got."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        n = len(self.bodies)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for word in (f" answer{n}", " to", f" turn{n}"):
            await resp.write(chunk(word))
        await resp.write(USAGE + b"data: [DONE]\n\n")
        return resp


async def test_each_turn_follows_the_answer_it_carries(server, tmp_path: Path) -> None:
    echo = Echo()
    url = await server(echo.chat)
    scenario = parse_scenario({
        "name": "talk", "workload": {"prompt_tokens": 8, "output_tokens": 3, "sessions": {"turns": 3, "think_s": 0.05}},
        "endpoint": {"scrape_interval_s": 0},
        "phases": [{"name": "p", "load": {"type": "poisson", "rate": 20, "requests": 4}}],
    }, "test")
    result = await run_scenario(scenario, Endpoint(url, "m"), tmp_path / "run")
    records = result.records
    assert len(records) == 12 and all(r.status == "ok" for r in records)
    by_id = {b["messages"][-1]["content"]: b for b in echo.bodies}
    sessions: dict[str, list[Any]] = {}
    for rec in records:
        sessions.setdefault(rec.session or "", []).append(rec)
    assert len(sessions) == 4
    for turns in sessions.values():
        turns.sort(key=lambda r: r.turn)
        assert [r.turn for r in turns] == [0, 1, 2]
        for before, after in itertools.pairwise(turns):
            # Sent when the previous answer had ended plus the think time, and not before.
            assert after.intended_ns == before.end_ns + 50 * NS_PER_MS
            assert after.sent_ns is not None and after.sent_ns >= after.intended_ns
    # Every later turn's history holds the words the server answered to the turn before it.
    for body in echo.bodies:
        messages = body["messages"]
        for k in range(1, len(messages) - 1, 2):
            asked = messages[k - 1]["content"]
            answered = echo.bodies.index(by_id[asked]) + 1
            assert messages[k] == {"role": "assistant", "content": f" answer{answered} to turn{answered}"}
    assert sorted(len(b["messages"]) for b in echo.bodies) == [1] * 4 + [3] * 4 + [5] * 4
    stats = result.summary.phases[0].sessions
    assert stats is not None and stats.conversations == 4 and stats.turns == 12
    assert set(stats.ttft_by_turn_ms) == {"0", "1", "2"} and stats.ttft_by_turn_ms["2"].count == 4
    assert stats.prompt_tokens_by_turn_mean["2"] > stats.prompt_tokens_by_turn_mean["0"]


@pytest.mark.timing
def test_a_multi_turn_scenario_against_the_simulator_matches_its_prediction(tmp_path: Path) -> None:
    path = ROOT / "scenarios" / "multi-turn.yaml"
    proc = harness("run", str(path), "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = tmp_path.iterdir()
    real = json.loads((run_dir / "summary.json").read_text())["phases"][0]
    predicted = json.loads(harness("predict", str(path), "--json").stdout)["phases"][0]
    assert real["sessions"]["turns"] == predicted["sessions"]["turns"] == real["requests"]["ok"]
    assert real["sessions"]["prompt_tokens_by_turn_mean"] == predicted["sessions"]["prompt_tokens_by_turn_mean"]
    # The simulator counts the history it was sent, the real answers included, exactly as asked.
    assert real["tokens"]["prompt_mismatched"] == 0
    assert "sessions" in (run_dir / "summary.json").read_text()


async def test_the_plan_counts_the_requests_a_multi_turn_phase_sends(sim_url: str, tmp_path: Path) -> None:
    """The plan's "6 requests" was the conversations; each of their turns is a request."""
    from harness.config.scenario import load_scenario
    from harness.run.display import plan_lines

    url = sim_url
    shipped = load_scenario(ROOT / "scenarios" / "multi-turn.yaml")
    scenario = shipped.model_copy(update={"endpoint": shipped.endpoint.model_copy(update={"scrape_interval_s": 0})})
    said = plan_lines(scenario, Endpoint(url, "llama-3.1-8b"), False, tmp_path)[2]
    result = await run_scenario(scenario, Endpoint(url, "llama-3.1-8b"), tmp_path / "run")
    assert all(r.status == "ok" for r in result.records)
    assert "2 conversations/s, 6 conversations" in said
    assert f"({len(result.records)} requests: one per turn)" in said and len(result.records) > 6, said
