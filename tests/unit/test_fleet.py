"""Fleets in virtual time: replicas behind a router, a prefill pool whose KV crosses a link to the decode pool
(harness/sim/fleet.py, docs/fleets.md). No network: `predict` and the engines on a fake clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from harness.clock import FakeClock
from harness.config.scenario import parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue
from harness.devices.links import LINKS, transfer_s
from harness.devices.step import StepLoad
from harness.sim.build import perf_model
from harness.sim.deployment import build_driver, deployment_problem, handoff, prefill_server
from harness.sim.engine import Engine, EngineConfig, SimRequest
from harness.sim.fleet import FleetDriver
from harness.sim.fleet_metrics import FleetSeries
from harness.sim.kvcache import block_hashes
from harness.sim.router import LeastOutstanding, PrefixAware, RoundRobin
from harness.tools.predict import predict

PROMPT, OUTPUT = 4096, 32


def _phase(simulator: dict[str, Any], load: dict[str, Any], prompt: int = PROMPT) -> dict[str, Any]:
    scenario = parse_scenario({
        "name": "fleet", "seed": 5, "workload": {"prompt_tokens": prompt, "output_tokens": OUTPUT},
        "simulator": {"accelerator": "h100-sxm", "model": "llama-3.1-8b", "noise_sigma": 0, **simulator},
        "phases": [{"name": "p", "load": load}]}, "test")
    (phase,) = predict(scenario).to_json()["phases"]
    return dict(phase)


ONE = {"type": "batch", "size": 1, "batches": 1}


def test_a_disaggregated_first_token_waits_for_the_kv_transfer_and_one_decode_step() -> None:
    alone = _phase({}, ONE)
    split = _phase({"prefill": "h100-sxm", "kv_link": "pcie"}, ONE)
    cfg = SimulatorConfig(accelerator="h100-sxm", model="llama-3.1-8b")
    model = catalogue().models["llama-3.1-8b"]
    kv = PROMPT * 2 * model.full_layers * model.kv_heads * model.head_dim * 2  # K and V, bf16
    moved = LINKS["pcie"].latency_s + kv / LINKS["pcie"].bytes_per_s
    first_decode = perf_model(cfg)[0].step_seconds(StepLoad(tokens=1, seqs=1, decodes=1, decode_context=PROMPT))
    added = split["latency_ms"]["ttft"]["p50"] - alone["latency_ms"]["ttft"]["p50"]
    assert added == pytest.approx((moved + first_decode) * 1e3, rel=0.01)
    assert moved > 0.008  # 512 MiB of KV over PCIe: the transfer is most of what was added
    # the decode pool runs the same decode steps as the colocated server did
    assert split["latency_ms"]["tpot"]["p50"] == pytest.approx(alone["latency_ms"]["tpot"]["p50"], rel=0.01)


def test_a_first_token_from_the_prefill_pool_skips_the_transfer_and_the_decode_step() -> None:
    """DistServe's and Splitwise's handoff: the client's first token is the prefill server's; the transfer
    moves onto the second token's path instead."""
    alone = _phase({}, ONE)
    split = _phase({"prefill": "h100-sxm", "kv_link": "pcie", "first_token": "prefill"}, ONE)
    model = catalogue().models["llama-3.1-8b"]
    moved = LINKS["pcie"].latency_s + PROMPT * model.kv_bytes_per_token(2) / LINKS["pcie"].bytes_per_s
    ttft, e2e = (split["latency_ms"][m]["p50"] - alone["latency_ms"][m]["p50"] for m in ("ttft", "e2e"))
    assert abs(ttft) < 0.01 * alone["latency_ms"]["ttft"]["p50"]
    # the same 31 decode steps after the first token, the transfer before the first of them
    assert e2e == pytest.approx(moved * 1e3, rel=0.01)


def test_an_answer_of_one_token_ends_on_the_prefill_server() -> None:
    cfg = SimulatorConfig(prefill="h100-sxm", first_token="prefill", noise_sigma=0)
    reqs = [SimRequest(f"r{i}", 256, 1 + i % 2, i * 1_000_000) for i in range(6)]
    fleet = _run_fleet(cfg, reqs)
    assert [len(r.token_ns) for r in reqs] == [1, 2] * 3 and all(r.finished for r in reqs)
    assert fleet.transfers == 3  # only the answers with a second token moved
    snap = fleet.snapshot()
    assert snap.generation_tokens == 9 and snap.prompt_tokens == 6 * 256  # as the client was answered
    assert fleet.prefill is not None
    assert all(e.pool.used == 0 for e in (*fleet.prefill.engines, *fleet.decode.engines))


def test_layer_by_layer_hides_the_transfer_behind_the_prefill() -> None:
    whole = _phase({"prefill": "h100-sxm", "kv_link": "pcie"}, ONE)
    layered = _phase({"prefill": "h100-sxm", "kv_link": "pcie", "kv_transfer": "layerwise"}, ONE)
    model = catalogue().models["llama-3.1-8b"]
    moving = PROMPT * model.kv_bytes_per_token(2) / LINKS["pcie"].bytes_per_s
    # a 4,096-token prefill (~0.1 s) outlasts the 9 ms move: all but the last of 32 layers' share is hidden
    hidden = whole["latency_ms"]["ttft"]["p50"] - layered["latency_ms"]["ttft"]["p50"]
    assert hidden == pytest.approx(moving * (1 - 1 / model.layers) * 1e3, rel=0.01)


def test_transfer_time_whole_and_layerwise() -> None:
    link = LINKS["infiniband"]
    gb = 1e9
    assert transfer_s(gb, link, 2, False, 0.0, 80) == pytest.approx(link.latency_s + gb / (2 * link.bytes_per_s))
    # layer by layer behind a prefill longer than the whole move: the last layer's share is left
    moving = gb / link.bytes_per_s
    assert transfer_s(gb, link, 1, True, 1.0, 80) == pytest.approx(link.latency_s + moving / 80)
    # behind a prefill shorter than the move: what the link could not keep up with is left too
    assert transfer_s(gb, link, 1, True, moving / 4, 80) == pytest.approx(
        link.latency_s + moving / 80 + 0.75 * moving)


def test_two_round_robin_replicas_at_twice_the_rate_are_one_server_at_the_rate() -> None:
    """A constant load split by round robin: each replica sees every other arrival — one server's load at half
    the rate, request for request."""
    load = {"type": "constant", "rate": 16, "requests": 64}
    two = _phase({"replicas": 2}, {**load, "rate": 32, "requests": 128})
    one = _phase({}, load)
    busy = _phase({}, {**load, "rate": 32, "requests": 128})
    for metric in ("ttft", "tpot", "e2e"):
        for q in ("p50", "p99"):
            assert two["latency_ms"][metric][q] == pytest.approx(one["latency_ms"][metric][q], rel=0.02), (metric, q)
    assert busy["latency_ms"]["ttft"]["p99"] > 1.5 * two["latency_ms"]["ttft"]["p99"]


def _engine(blocks: int = 10_000) -> Engine:
    return Engine(perf_model(SimulatorConfig())[0], EngineConfig(kv_blocks=blocks, noise_sigma=0.0))


def _req(rid: str, words: list[str]) -> SimRequest:
    return SimRequest(rid, len(words), 4, 0, block_hashes=block_hashes(words))


def test_routers_pick_as_their_rules_say() -> None:
    engines = [_engine(), _engine(), _engine()]
    for i in range(2):
        engines[0].add(_req(f"a{i}", ["x"] * 40))
    engines[1].add(_req("b", ["x"] * 40))
    rr = RoundRobin()
    assert [rr.pick(_req("r", ["y"]), engines) for _ in range(4)] == [0, 1, 2, 0]
    assert LeastOutstanding().pick(_req("r", ["y"]), engines) == 2
    prefix = PrefixAware(3, 1000)
    shared = [f"w{i}" for i in range(128)]
    first = prefix.pick(_req("s1", shared + ["a"] * 32), engines)
    assert first == 2  # no prefix seen anywhere: the shortest queue, then the fewest outstanding
    engines[2].add(_req("s1", shared))
    engines[2].add(_req("s1b", shared))
    # a prompt 80% the same prefix goes where that went, though that server's queue is the longest now
    # (3 × 0.8 beats 2 × the shortest queue)
    assert prefix.pick(_req("s2", shared + ["b"] * 32), engines) == 2
    assert prefix.pick(_req("other", [f"z{i}" for i in range(96)]), engines) != 2


def _run_fleet(cfg: SimulatorConfig, requests: list[SimRequest], abort_after_ns: int | None = None) -> FleetDriver:
    clock = FakeClock()
    driver = build_driver(cfg, clock, settle=clock.end_of_instant)
    assert isinstance(driver, FleetDriver)

    async def go() -> None:
        running = asyncio.ensure_future(driver.run())
        for req in requests:
            driver.submit(req)
        if abort_after_ns is not None:
            await clock.sleep_until(abort_after_ns)
            for req in requests:
                driver.abort(req)
        await clock.sleep_until(10**10)
        running.cancel()

    async def main() -> None:
        task = asyncio.ensure_future(go())
        await clock.run_until_idle(task)
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    return driver


def test_a_prompt_aborted_while_its_kv_is_moving_frees_both_sides() -> None:
    cfg = SimulatorConfig(prefill="h100-sxm", kv_link="pcie", noise_sigma=0)
    words = [f"t{i}" for i in range(PROMPT)]
    req = SimRequest("r", PROMPT, 8, 0, block_hashes=block_hashes(words))
    ahead_ends = int(perf_model(cfg)[0].step_seconds(StepLoad(tokens=PROMPT, seqs=1, prefill_attn=PROMPT ** 2 / 2))
                     * 1e9)
    fleet = _run_fleet(cfg, [req], abort_after_ns=ahead_ends + 1_000_000)  # 1 ms into a ~9 ms transfer
    assert fleet.transfers == 1 and fleet.in_transfer == 0
    assert req.token_ns == []  # never reached the decode pool
    assert fleet.prefill is not None
    assert all(e.pool.used == 0 for e in (*fleet.prefill.engines, *fleet.decode.engines))


def test_a_fleet_answers_every_token_once_and_metrics_say_each_server() -> None:
    cfg = SimulatorConfig(prefill="h100-sxm:1:2", replicas=3, router="least_outstanding", noise_sigma=0)
    reqs = [SimRequest(f"r{i}", 512, 16, i * 1_000_000, block_hashes=block_hashes([f"{i}-{j}" for j in range(512)]))
            for i in range(12)]
    fleet = _run_fleet(cfg, reqs)
    assert all(len(r.token_ns) == 16 for r in reqs)
    snap = fleet.snapshot()
    assert snap.generation_tokens == 12 * 16 and snap.prompt_tokens == 12 * 512  # as the endpoint answered
    families = {m.name: m for m in FleetSeries(fleet).collect()}
    servers = {s.labels["server"]: s.value for s in families["sim:pool_generation_tokens"].samples
               if s.name.endswith("_total")}
    assert sorted(servers) == ["decode-0", "decode-1", "decode-2", "prefill-0", "prefill-1"]
    assert servers["prefill-0"] + servers["prefill-1"] == 12  # one sampled token a prompt
    assert sum(v for k, v in servers.items() if k.startswith("decode")) == 12 * 16
    assert min(v for k, v in servers.items() if k.startswith("decode")) > 0  # least outstanding spread them
    assert families["sim:kv_transfers"].samples[0].value == 12


def test_pool_shapes_and_refusals() -> None:
    assert SimulatorConfig(prefill="h100-sxm:2:3").prefill == SimulatorConfig(
        prefill={"device": "h100-sxm", "tp": 2, "replicas": 3}).prefill
    for bad, said in (({"prefill": "h100-sxm:2:3:4"}, "ACCELERATOR[:TP[:REPLICAS]]"),
                      ({"prefill": "tpu-v9"}, "unknown accelerator 'tpu-v9'"),
                      ({"replicas": 2, "timing": "fixed"}, "fixed timing"),
                      ({"replicas": 0}, "greater than or equal to 1")):
        with pytest.raises(ValidationError, match=said.replace("[", r"\[").replace("]", r"\]")):
            SimulatorConfig.model_validate(bad)
    # a 70B model on one A100 for prefill does not start: named as the prefill pool's, with the fewest that do
    cfg = SimulatorConfig(model="llama-3.1-70b", tp=4, prefill="a100-80g:1")
    problem = deployment_problem(cfg)
    assert problem is not None and problem.startswith("the prefill pool: ") and "tp 4" in problem
    assert deployment_problem(cfg.changed(prefill="a100-80g:4")) is None
    # the prefill server takes its own accelerator's batch defaults, not the decode server's
    assert prefill_server(SimulatorConfig(prefill="a100-80g")) is not None
    assert (prefill_server(SimulatorConfig(prefill="a100-80g")).max_num_seqs  # type: ignore[union-attr]
            == catalogue().devices["a100-80g"].batch_defaults()[0])


def test_the_kv_moves_over_as_many_links_as_both_sides_split_it() -> None:
    cfg = SimulatorConfig(model="llama-3.1-70b", tp=8, prefill="h100-sxm:2", kv_link="infiniband")
    model = catalogue().models["llama-3.1-70b"]
    seconds = handoff(cfg).transfer(SimRequest("r", 1000, 1, 0), 1.0)
    kv = 1000 * model.kv_bytes_per_token(2)
    assert seconds == pytest.approx(LINKS["infiniband"].latency_s + kv / (2 * LINKS["infiniband"].bytes_per_s))
