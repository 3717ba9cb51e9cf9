"""Where a phase's stress landed: memory- or compute-bound, and how much of the device's peak bandwidth (MBU)
and arithmetic (MFU) it used.

Read from the bundled simulator's account of its steps (its `sim:` series, scraped like any server's), or, for
any other endpoint on a declared accelerator, estimated from the measured inter-token latency and batch. Pure:
scraped rows and a time window, or a phase's statistics, in; a `Stress` out.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.scenario import Hardware
from harness.devices.catalogue import resolve_accelerator, resolve_model
from harness.devices.step import Serving, StepLoad
from harness.stats.schema import PhaseStats, Stress
from harness.stats.server import Row, counter_rate, gauge

SIMULATOR_BASIS = "the simulator's roofline account of every step (sim: metrics)"


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def account(memory_s: float, compute_s: float, read_bytes: float | None, flops: float | None, window_s: float,
            peaks: tuple[float | None, float | None], basis: str = SIMULATOR_BASIS) -> Stress | None:
    """The stress of `window_s` seconds in which the engine stepped `memory_s` + `compute_s` seconds, reading
    `read_bytes` and doing `flops`, on a device of `peaks` (bytes/s, FLOP/s)."""
    busy = memory_s + compute_s
    if busy <= 0 or window_s <= 0:
        return None
    peak_bytes, peak_flops = peaks
    return Stress(source="simulator", basis=basis, memory_bound_share=memory_s / busy, busy_share=busy / window_s,
                  mbu=_share(read_bytes, None if peak_bytes is None else busy * peak_bytes),
                  mfu=_share(flops, None if peak_flops is None else busy * peak_flops))


def from_simulator(rows: Sequence[Row], start_ns: int, end_ns: int) -> Stress | None:
    """The phase's stress from the simulator's counters over [start, end]; None from any other server."""
    rates = [counter_rate(rows, name, start_ns, end_ns) for name in
             ("memory_bound_seconds_total", "compute_bound_seconds_total", "hbm_read_bytes_total", "flops_total")]
    memory, compute, read, done = rates
    if memory is None or compute is None:
        return None
    peaks = gauge(rows, "peak_hbm_bytes_per_second")[0], gauge(rows, "peak_flops_per_second")[0]
    return account(memory, compute, read, done, 1.0, peaks)  # rates: one second's worth


def unestimated(hardware: Hardware, model_name: str | None, stats: PhaseStats) -> str | None:
    """Why `estimate` can say nothing of a phase on the declared accelerator (None: it can), in words."""
    declared = f"--hardware {hardware.accelerator}"
    if resolve_accelerator(hardware.accelerator).bf16_flops is None:
        return f"{declared}: no stress estimate: that preset has no roofline (an SRAM system or a fitted twin)"
    if not stats.requests.ok or not stats.latency_ms.itl.p50:
        return f"{declared}: no stress estimate: no request of the phase streamed two tokens to time a step by"
    value = hardware.model if hardware.model is not None else model_name
    try:
        if value is None:
            raise ValueError("no model named")
        resolve_model(value)
    except ValueError:
        return (f"{declared}: no stress estimate: the endpoint serves {value!r}, which is no model preset; declare "
                f"the architecture it runs: --hardware {hardware.accelerator},model=llama-3.1-8b (see `harness sim "
                "presets`)")
    return None


def estimate(hardware: Hardware, model_name: str | None, stats: PhaseStats, running: float | None) -> Stress | None:
    """The stress of a phase on a declared accelerator, from what was measured: a decode step lasts one ITL
    (p50), reads every weight and the KV cache of each running request's context, and does 2 FLOPs a weight
    and the attention's per token. `running`: the server's mean running batch (scraped), else Little's law
    from the client's own records. None when the accelerator has no roofline or nothing was measured."""
    if unestimated(hardware, model_name, stats) is not None:
        return None
    accelerator = resolve_accelerator(hardware.accelerator)
    model = resolve_model(hardware.model if hardware.model is not None else str(model_name))  # checked above
    itl_ms, ok = float(stats.latency_ms.itl.p50 or 0.0), stats.requests.ok
    source = "scraped"
    if running is None:
        running, source = stats.throughput.requests_per_s * (stats.latency_ms.e2e.mean or 0.0) / 1e3, "Little's law"
    batch = max(running, 1.0)
    context = (stats.tokens.input + stats.tokens.output / 2) / ok
    # What the device's own law says a decode step of this batch reads and computes, timed by the measured ITL
    law = accelerator.law(model, Serving(hardware.weights, hardware.tp))
    n = round(batch)
    cost = law.step_cost(StepLoad(tokens=n, seqs=n, decodes=n, decode_context=round(n * context)))
    scale = batch / n  # the law steps whole sequences; the mean batch need not be one
    read, flops = cost.hbm_bytes * scale, cost.flops * scale
    peak_bytes, peak_flops = law.peaks or (1.0, 1.0)  # unestimated() has refused a device without a roofline
    step_s = itl_ms / 1e3
    basis = (f"ITL p50 {itl_ms:.1f} ms, {running:.1f} requests running ({source}), {context:,.0f}-token mean "
             f"context, {model.name} {model.format(hardware.weights).name} on {hardware.tp} × {accelerator.name}")
    return Stress(source="estimate", basis=basis, memory_bound_share=float(read / peak_bytes >= flops / peak_flops),
                  mbu=read / (step_s * peak_bytes), mfu=flops / (step_s * peak_flops))
