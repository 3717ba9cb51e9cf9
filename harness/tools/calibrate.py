"""`harness calibrate`: how well this machine's harness measures, and where its ceiling is.

The bundled simulator runs in fixed-timing mode (constant TTFT and ITL, each token on an exact
schedule, no model), pinned to its own core. The harness drives it at rising concurrency and
compares what it measured with what the simulator recorded for the same request ids: the
difference is the harness's own error. A last level with zero simulated delay finds the
harness's ceiling in streamed tokens/s and its CPU cost per 1,000 tokens. The result is kept
per machine, so every later run can say how close it came to that ceiling.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

import aiohttp
import numpy as np

from harness.client.backend import Endpoint
from harness.config.scenario import Scenario, parse_scenario
from harness.config.simulator import SimulatorConfig
from harness.gctune import tune_for_timing
from harness.records import RequestRecord
from harness.records_read import read_records
from harness.run.runner import run_scenario
from harness.run.simulator import bundled_simulator
from harness.stats.metrics import tpot_ns, ttft_ns
from harness.tools.calibration_store import Calibration, Ceiling, Errors, Level, machine, save_calibration

MS = 1e6
SHAPES = ("token", "step")  # one event a write (vLLM, llama.cpp, TGI); a step's tokens in one write


def _scenario(concurrency: int, seconds: float, out_tokens: int, stagger_s: float) -> Scenario:
    # Users start spread over one request's duration, so the load is steady rather than lockstep.
    return parse_scenario({
        "name": f"calibrate-{concurrency}",
        "workload": {"prompt_tokens": 16, "output_tokens": out_tokens},
        "phases": [{"name": "streams", "load": {"type": "concurrency", "concurrency": concurrency,
                                                 "duration_s": seconds, "stagger_s": stagger_s}}],
    }, "calibrate")


class Truth(TypedDict):
    """What the simulator recorded of one request (`/sim/truth`): when it read it, when it wrote each
    token."""

    request_id: str
    arrival_ns: int
    token_ns: list[int]


async def ground_truth(base_url: str, ids: list[str]) -> dict[str, Truth]:
    """What the simulator at `base_url` recorded for these request ids: arrival and every token's write."""
    url = base_url.removesuffix("/v1") + "/sim/truth"
    out: dict[str, Truth] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for i in range(0, len(ids), 2000):
            async with session.post(url, json={"ids": ids[i:i + 2000]}) as resp:
                for t in (await resp.json())["requests"]:
                    out[t["request_id"]] = t
    return out


def errors(records: list[RequestRecord], truth: dict[str, Truth]) -> Errors:
    """Harness measurement minus the simulator's ground truth, per request and per token gap.

    The TTFT error splits in two, both clocks being one: how long the simulator took to read a request the
    harness had handed to the kernel (`server_read_ms`: the server's own queue, which its TTFT does not
    count and a user does wait), and how late the harness stamped the first token after the simulator wrote
    it (`first_token_late_ms`: the client's own part).
    """
    ttft: list[int] = []
    tpot: list[float] = []
    gaps: list[int] = []
    delivery: list[int] = []
    read: list[int] = []
    first_late: list[int] = []
    for rec in records:
        t = truth.get(rec.request_id)
        measured_ttft, measured_tpot = ttft_ns(rec), tpot_ns(rec)
        if rec.status != "ok" or t is None or measured_ttft is None or measured_tpot is None:
            continue
        tokens = np.asarray(t["token_ns"], dtype=np.int64)
        seen = np.asarray(rec.chunk_ns, dtype=np.int64)
        if len(tokens) != len(seen) or len(seen) < 2:
            continue
        ttft.append(measured_ttft - (tokens[0] - t["arrival_ns"]))
        if rec.sent_ns is not None:
            read.append(t["arrival_ns"] - rec.sent_ns)
        first_late.append(seen[0] - tokens[0])
        tpot.append(measured_tpot - (tokens[-1] - tokens[0]) / (len(tokens) - 1))
        gaps.extend(np.diff(seen) - np.diff(tokens))
        delivery.extend(seen - tokens)

    def pct(values: Sequence[float], q: float) -> float | None:
        return float(np.percentile(np.abs(values), q)) / MS if values else None

    return {
        "requests_compared": len(ttft),
        "ttft_error_ms": {"p50": pct(ttft, 50), "p99": pct(ttft, 99), "max": pct(ttft, 100)},
        "tpot_error_ms": {"p50": pct(tpot, 50), "p99": pct(tpot, 99)},
        "chunk_gap_error_ms": {"p50": pct(gaps, 50), "p99": pct(gaps, 99)},
        "token_delivery_ms": {"p50": pct(delivery, 50), "p99": pct(delivery, 99)},
        "first_token_late_ms": {"p50": pct(first_late, 50), "p99": pct(first_late, 99)},
        "server_read_ms": {"p50": pct(read, 50), "p99": pct(read, 99)},
    }


async def _level(sim: SimulatorConfig, concurrency: int, seconds: float, out_tokens: int,
                 run_dir: Path, pin: bool, lockstep: bool = False) -> Level:
    """`lockstep`: every user starts at once, so each wave of requests ends, and starts again, together."""
    stagger_s = 0.0 if lockstep else (sim.fixed_ttft_ms + sim.fixed_itl_ms * out_tokens) / 1e3
    tune_for_timing()  # what the previous level left behind must not be scanned during this one
    async with bundled_simulator(sim, pin=pin) as (url, model):
        result = await run_scenario(_scenario(concurrency, seconds + stagger_s, out_tokens, stagger_s),
                                    Endpoint(url, model), run_dir)
        records = list(read_records(run_dir / "requests.jsonl"))
        truth = await ground_truth(url, [r.request_id for r in records])
    (phase,) = result.summary.phases
    tokens = phase.tokens.output
    # The phase's own CPU, from its first send to its last record: writing Parquet and drawing the report
    # afterwards is not the cost of streaming.
    cpu_s = phase.client.cpu_seconds or 0.0
    return {
        "concurrency": concurrency,
        "lockstep": lockstep,
        "schedule_lag_p99_ms": phase.latency_ms.schedule_lag.p99,
        "requests": phase.requests.total,
        "ok": phase.requests.ok,
        "output_tokens_per_s": phase.throughput.output_tokens_per_s,
        "requests_per_s": phase.throughput.requests_per_s,
        "harness_cpu_ms_per_1k_tokens": cpu_s * 1e3 / (tokens / 1e3) if tokens else None,
        "client_limited": phase.client_limited,
        "client_limited_reason": phase.client_limited_reason,
        **errors(records, truth),
    }


async def calibrate(levels: list[int], seconds: float, reports_dir: Path, ttft_ms: float = 50.0,
                    itl_ms: float = 10.0, out_tokens: int = 128, ceiling_streams: int = 64,
                    ceiling_tokens: int = 512, pin: bool = True, lockstep_levels: tuple[int, ...] = ()
                    ) -> Calibration:
    """Fidelity at `levels` (users staggered) and `lockstep_levels` (every wave together), with the simulator
    writing every event on its own as vLLM, llama.cpp and TGI do; the ceiling in both stream shapes."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = reports_dir / f"{stamp}-calibration"
    fixed = SimulatorConfig(timing="fixed", fixed_ttft_ms=ttft_ms, fixed_itl_ms=itl_ms, stream_writes="token")
    results = [await _level(fixed, n, seconds, out_tokens, base / f"fidelity-{n}", pin) for n in levels]
    results += [await _level(fixed, n, seconds, out_tokens, base / f"lockstep-{n}", pin, lockstep=True)
                for n in lockstep_levels]
    ceilings: dict[str, Ceiling] = {}
    for shape in SHAPES:
        instant = SimulatorConfig(timing="fixed", fixed_ttft_ms=0.0, fixed_itl_ms=0.0, stream_writes=shape)
        level = await _level(instant, ceiling_streams, seconds, ceiling_tokens, base / f"ceiling-{shape}", pin)
        ceilings[shape] = {"streams": ceiling_streams, "output_tokens": ceiling_tokens, "stream_writes": shape,
                           "output_tokens_per_s": level["output_tokens_per_s"],
                           "requests_per_s": level["requests_per_s"],
                           "harness_cpu_ms_per_1k_tokens": level["harness_cpu_ms_per_1k_tokens"]}
    report: Calibration = {
        "schema": "harness.calibration/1", "machine": machine(), "created": stamp,
        "fidelity": {"ttft_ms": ttft_ms, "itl_ms": itl_ms, "output_tokens": out_tokens, "stream_writes": "token",
                     "levels": results},
        # A run's client ceiling is the one of the shape users meet: one event a write.
        "ceiling": ceilings["token"], "ceiling_step": ceilings["step"],
    }
    (base / "calibration.json").write_text(json.dumps(report, indent=2) + "\n")
    save_calibration(report)
    return report


def render(report: Calibration) -> str:
    def f(v: float | None, spec: str = ".2f") -> str:
        return "-" if v is None else format(v, spec)

    fid = report["fidelity"]
    lines = [f"fidelity: fixed TTFT {fid['ttft_ms']:g} ms, ITL {fid['itl_ms']:g} ms, {fid['output_tokens']} tokens, "
             "one event a write; errors are |harness − simulator ground truth|",
             "(TTFT err = 1st token late, the client's part, + server read, the simulator's own queue)",
             f"{'streams':>14} {'requests':>9} {'TTFT err p50/p99 ms':>20} {'1st token late p99':>19} "
             f"{'server read p99':>16} {'TPOT err p99':>13} {'gap err p99':>12} {'lag p99':>8} {'tokens/s':>9} "
             f"{'CPU ms/1k tok':>14}  client limited"]
    for lv in fid["levels"]:
        streams = f"{lv['concurrency']}{' lock-step' if lv.get('lockstep') else ''}"
        lines.append(
            f"{streams:>14} {lv['requests']:>9} "
            f"{f(lv['ttft_error_ms']['p50']) + ' / ' + f(lv['ttft_error_ms']['p99']):>20} "
            f"{f(lv.get('first_token_late_ms', {}).get('p99')):>19} {f(lv.get('server_read_ms', {}).get('p99')):>16} "
            f"{f(lv['tpot_error_ms']['p99'], '.3f'):>13} {f(lv['chunk_gap_error_ms']['p99']):>12} "
            f"{f(lv.get('schedule_lag_p99_ms')):>8} "
            f"{lv['output_tokens_per_s']:>9,.0f} {f(lv['harness_cpu_ms_per_1k_tokens']):>14}  "
            f"{lv['client_limited_reason'] or 'no'}")
    for c, shape in ((report["ceiling"], "one event a write"), (report.get("ceiling_step"), "a step's tokens a write")):
        if c is None:
            continue
        lines.append(f"ceiling, {shape} ({c['streams']} streams, {c['output_tokens']} tokens, zero simulated delay): "
                     f"{c['output_tokens_per_s']:,.0f} tokens/s, {c['requests_per_s']:,.1f} requests/s, "
                     f"{f(c['harness_cpu_ms_per_1k_tokens'])} ms of harness CPU per 1,000 tokens")
    return "\n".join(lines)
