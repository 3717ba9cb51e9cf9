"""`harness plan` (issue 66): the deployments it considers, decode steps taken ahead exactly as one by one, the
fast search picking what the exhaustive one picks, and the command's answers and refusals. No network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.config.fleet import Pool
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.plan.bound import starts
from harness.plan.front import capacity_front, cheapest, rows
from harness.plan.search import search
from harness.plan.space import Deployment, deployments
from harness.plan.trial import Slos, plan_requests
from harness.sim import virtual_fleet
from harness.sim.deployment import handoff, pools
from harness.sim.virtual_fleet import VirtualFleet

ROOT = Path(__file__).resolve().parents[2]
SCENARIO: dict[str, Any] = {
    "name": "plan", "seed": 4, "workload": {"prompt_tokens": {"dist": "uniform", "min": 256, "max": 2048},
                                            "output_tokens": {"dist": "uniform", "min": 16, "max": 128}},
    "slo": {"ttft_ms": 400, "tpot_ms": 25}, "simulator": {"model": "llama-3.1-8b"},
    "phases": [{"name": "p", "load": {"type": "poisson", "rate": 20, "requests": 100}}]}


def test_the_deployments_within_a_budget() -> None:
    # one accelerator of tp 1, 2, 4 within 4 devices: pools 1-4 × tp1, 1-2 × tp2, 1 × tp4 (7); two: 14
    both = deployments(["h100-sxm", "a100-80g"], 4, lambda a, tp: True)
    colocated = [d for d in both if d.prefill is None]
    assert len(colocated) == 14
    # prefill + decode within 4 devices: by pool size 1: 2 pools, 2: 4, 3: 2, 4: 6 → 2·2 + 2·2·4 + 2·2·2 + 4·4
    assert len(both) - len(colocated) == 4 + 16 + 8 + 16
    assert all(d.devices <= 4 for d in both)
    routed = deployments(["h100-sxm"], 2, lambda a, tp: True, routers=("round_robin", "prefix_aware"))
    assert sum(d.decode.replicas > 1 and d.prefill is None for d in routed) == 2  # 2 × tp1, both routers
    no_tp1 = deployments(["h100-sxm"], 4, lambda a, tp: tp > 1, disaggregated=False)
    assert {(d.decode.tp, d.decode.replicas) for d in no_tp1} == {(2, 1), (2, 2), (4, 1)}
    priced = deployments(["h100-sxm", "a100-80g"], 4, lambda a, tp: True, prices={"h100-sxm": 2.0, "a100-80g": 1.0},
                         money=3.0)
    assert priced and all((d.cost_per_h({"h100-sxm": 2.0, "a100-80g": 1.0}) or 99) <= 3.0 for d in priced)
    assert Deployment(Pool(accelerator="h100-sxm", tp=2, replicas=3)).watts() == 6 * 700


def test_decode_steps_taken_ahead_are_the_steps_taken_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    jumps = []
    taken = virtual_fleet.decode_ahead

    def counted(*args: Any) -> int | None:
        end = taken(*args)
        jumps.append(end is not None)
        return end

    monkeypatch.setattr(virtual_fleet, "decode_ahead", counted)
    scenario = parse_scenario(SCENARIO, "test")
    requests = plan_requests(scenario, 200)
    for cfg in (SimulatorConfig(replicas=2, router="least_outstanding", prefix_caching=False),
                SimulatorConfig(prefill="h100-sxm", accelerator="a100-80g", kv_link="roce", prefix_caching=False),
                SimulatorConfig(prefill="h100-sxm", first_token="prefill", prefix_caching=False)):
        stamps = []
        for jump in (False, True):
            reqs = requests.at(6.0)
            VirtualFleet(*pools(cfg), handoff(cfg), jump=jump).run(reqs)
            stamps.append([r.token_ns for r in reqs])
        assert stamps[0] == stamps[1]  # every token at the same nanosecond, step noise included
    assert sum(jumps) > 50


def test_a_first_token_from_the_prefill_pool_comes_first_in_a_trial_too() -> None:
    """The prefill pool runs the same either way (its KV held until it lands): only where the first token
    leaves from differs, so every request's first token is earlier, and every answer as long."""
    requests = plan_requests(parse_scenario(SCENARIO, "test"), 100)
    firsts, lengths = [], []
    for first in ("decode", "prefill"):
        cfg = SimulatorConfig(prefill="h100-sxm", kv_link="roce", first_token=first, prefix_caching=False)
        reqs = requests.at(6.0)
        VirtualFleet(*pools(cfg), handoff(cfg)).run(reqs)
        firsts.append([r.token_ns[0] for r in reqs])
        lengths.append([len(r.token_ns) for r in reqs])
    assert all(p < d for d, p in zip(*firsts, strict=True))
    assert lengths[0] == lengths[1] == [int(n) for n in requests.outputs[:100]]


def test_the_fast_search_picks_what_the_exhaustive_search_picks() -> None:
    scenario = parse_scenario(SCENARIO, "test")
    base = scenario.simulator
    grid = deployments(["h100-sxm", "a100-80g"], 4, lambda a, tp: starts(base, a, tp))[:40]
    assert len(grid) == 40
    prices = {"h100-sxm": 2.5, "a100-80g": 1.6}
    reqs, slos, target = plan_requests(scenario, 120), Slos(0.4, 0.025, 0.9), 20.0
    fast = {m.deployment: m for m in search(base, grid, reqs, slos, prices=prices, target=target, workers=2)}
    full = {m.deployment: m for m in search(base, grid, reqs, slos, prices=prices, target=target, fast=False,
                                            workers=2)}
    pick = cheapest(rows(list(fast.values()), prices, reqs.mean_output), target)
    assert pick is not None
    reference = cheapest(rows(list(full.values()), prices, reqs.mean_output), target)
    assert reference is not None and pick.measured.deployment == reference.measured.deployment
    assert [r.measured.deployment for r in capacity_front(rows(list(fast.values()), prices, reqs.mean_output))] == [
        r.measured.deployment for r in capacity_front(rows(list(full.values()), prices, reqs.mean_output))]
    pruned = [d for d, m in fast.items() if m.capacity is None]
    assert pruned, "the bound pruned nothing on this grid: the test would not test it"
    for d, m in fast.items():
        assert full[d].capacity is not None and full[d].capacity <= m.bound  # the bound bounds
        if m.capacity is not None:
            assert m.capacity == full[d].capacity  # giving up early changes no verdict
    assert sum(m.trials for m in fast.values()) < sum(m.trials for m in full.values())


def test_the_command_answers_and_names_bad_flags(tmp_path: Path) -> None:
    runner = CliRunner()
    path = ROOT / "scenarios" / "disaggregated.yaml"
    for args, said in ((["--budget", "lots"], "--budget 'lots'"), (["--budget", "$20"], "needs --price"),
                       (["--devices", "tpu"], "--devices: unknown 'tpu'"), (["--links", "wifi"], "--links")):
        result = runner.invoke(main, ["plan", str(path), *args])
        assert result.exit_code == 2 and said in result.output, result.output
    no_slo = tmp_path / "no-slo.yaml"
    no_slo.write_text(path.read_text().replace("slo:\n  ttft_ms: 500\n  tpot_ms: 20\n", ""))
    result = runner.invoke(main, ["plan", str(no_slo)])
    assert result.exit_code == 2 and "plan needs an SLO" in result.output
    page = tmp_path / "plan.html"
    result = runner.invoke(main, ["plan", str(path), "--budget", "3", "--requests", "80", "--json", "--workers", "1",
                                  "--html", str(page)])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["target"] == 6 and len(answer["deployments"]) == 9  # 1 × h100-sxm: 4 colocated, 5 disaggregated
    assert answer["cheapest"] in [d["deployment"] for d in answer["deployments"]]
    text = page.read_text()
    simulated = sum(d["capacity"] is not None and d["capacity"] > 0 for d in answer["deployments"])
    assert text.count("fill='#bbb'") == simulated  # every deployment simulated is a point on the plane
    assert text.count("fill='#1f6feb'") == len(answer["capacity_front"])  # the front, marked
    assert f"<b>{answer['cheapest']}</b>" in text.replace("&gt;", ">")
