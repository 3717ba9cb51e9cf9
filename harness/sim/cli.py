"""`harness sim ...`: run the simulated accelerator server on its own, list its presets."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import click

from harness.gctune import tune_for_timing
from harness.sim.faults import ERROR_TYPES, FaultConfig
from harness.sim.perfmodel import StepLoad, build_model
from harness.sim.presets import ACCELERATORS, MODELS, PresetError, load_presets
from harness.sim.server import SimConfig, serve


def _load_presets(path: Path | None) -> None:
    if path is not None:
        try:
            load_presets(path)
        except PresetError as exc:
            raise click.BadParameter(str(exc), param_hint="--presets") from None


def _check_known(value: str, table: dict[str, object], flag: str) -> None:
    if value not in table:
        raise click.BadParameter(f"unknown {value!r}; known: {', '.join(sorted(table))}", param_hint=flag)


@click.group("sim")
def sim() -> None:
    """The bundled simulated accelerator server."""


_presets_option = click.option("--presets", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                               help="YAML file of extra accelerators and models.")


@sim.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port; the URL is printed as JSON on the first line of stdout.")
@click.option("--accelerator", default="h100-sxm", show_default=True, help="See `harness sim presets`.")
@click.option("--model", default="llama-3.1-8b", show_default=True, help="See `harness sim presets`.")
@_presets_option
@click.option("--served-model-name", default=None, help="Model name clients must send (default: --model).")
@click.option("--dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True,
              help="Weight type (the KV cache stays bf16).")
@click.option("--tp", type=click.IntRange(1, 64), default=1, show_default=True, help="Tensor parallelism.")
@click.option("--max-num-seqs", type=click.IntRange(1), default=256, show_default=True)
@click.option("--max-num-batched-tokens", type=click.IntRange(1), default=8192, show_default=True)
@click.option("--gpu-memory-utilization", type=click.FloatRange(0.05, 1.0), default=0.9, show_default=True)
@click.option("--max-model-len", type=click.IntRange(16), default=None, help="Default: the model's.")
@click.option("--no-prefix-caching", is_flag=True, help="Disable automatic prefix caching.")
@click.option("--timing", type=click.Choice(["engine", "fixed"]), default="engine", show_default=True,
              help="engine: continuous batching on the roofline model; fixed: constant TTFT and ITL whatever "
                   "the load (for calibrating clients).")
@click.option("--fixed-ttft-ms", type=click.FloatRange(0), default=50.0, show_default=True)
@click.option("--fixed-itl-ms", type=click.FloatRange(0), default=10.0, show_default=True)
@click.option("--max-waiting", type=click.IntRange(0), default=None,
              help="Answer 429 with Retry-After while this many requests wait.")
@click.option("--startup-delay-s", type=click.FloatRange(0), default=0.0, show_default=True,
              help="Answer 503 for this long after starting.")
@click.option("--fault-error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--fault-error-status", type=click.Choice([str(s) for s in sorted(ERROR_TYPES)]), default="500",
              show_default=True)
@click.option("--fault-stall-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--fault-stall-ms", type=click.FloatRange(0), default=1000.0, show_default=True)
@click.option("--fault-disconnect-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--fault-malformed-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds step noise, lengths and faults.")
@click.option("--noise", "noise_sigma", type=click.FloatRange(0, 1), default=0.03, show_default=True,
              help="Multiplicative step-time noise (lognormal sigma).")
@click.option("--api-key-env", default=None, metavar="VAR",
              help="Require this environment variable's value as the bearer API key.")
def serve_cmd(host: str, port: int, accelerator: str, model: str, presets: Path | None, api_key_env: str | None,
              fault_error_rate: float, fault_error_status: str, fault_stall_rate: float, fault_stall_ms: float,
              fault_disconnect_rate: float, fault_malformed_rate: float, no_prefix_caching: bool,
              **options: object) -> None:
    """Serve an OpenAI-compatible endpoint that emits tokens when a real engine would."""
    _load_presets(presets)
    _check_known(accelerator, ACCELERATORS, "--accelerator")  # type: ignore[arg-type]
    _check_known(model, MODELS, "--model")  # type: ignore[arg-type]
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.BadParameter(f"environment variable {api_key_env} is not set", param_hint="--api-key-env")
    faults = FaultConfig(error_rate=fault_error_rate, error_status=int(fault_error_status),
                         stall_rate=fault_stall_rate, stall_ms=fault_stall_ms,
                         disconnect_rate=fault_disconnect_rate, malformed_rate=fault_malformed_rate,
                         seed=int(options["seed"]))  # type: ignore[call-overload]
    cfg = SimConfig(accelerator=accelerator, model=model, api_key=api_key, faults=faults,
                    prefix_caching=not no_prefix_caching, **options)  # type: ignore[arg-type]
    asyncio.run(_serve_forever(cfg, host, port))


async def _serve_forever(cfg: SimConfig, host: str, port: int) -> None:
    runner, url = await serve(cfg, host, port)
    # Smaller young collections than the harness's: at 100,000 objects one took ~10 ms, and requests arriving
    # behind it were stamped late (constant 400 req/s: server-side gap CV 0.064 → 0.040–0.044 at 10,000),
    # while 2,048 streams still keep every step on time at 40 ms.
    tune_for_timing(young=10_000)
    sys.stdout.write(json.dumps({"url": url, "model": cfg.name}) + "\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _smallest_tp(accelerator: str, model: str) -> int | None:
    for tp in (1, 2, 4, 8):
        if build_model(accelerator, model, "bf16", tp).kv_capacity_tokens() > 16 * 1024:
            return tp
    return None


def preset_rows() -> list[tuple[str, str, str, str, str, str]]:
    """Per accelerator and model: the smallest TP that fits, ITL at batch 1 and 64 (1k context), KV tokens."""
    rows = []
    for acc in ACCELERATORS:
        for model in MODELS:
            tp = _smallest_tp(acc, model)
            if tp is None:
                rows.append((acc, model, "-", "does not fit", "", ""))
                continue
            perf = build_model(acc, model, "bf16", tp)
            itl = [perf.step_seconds(StepLoad(tokens=b, seqs=b, decodes=b, decode_context=b * 1024)) * 1e3
                   for b in (1, 64)]
            rows.append((acc, model, str(tp), f"{itl[0]:.1f}", f"{itl[1]:.1f}", f"{perf.kv_capacity_tokens():,}"))
    return rows


@sim.command("presets")
@_presets_option
def presets_cmd(presets: Path | None) -> None:
    """List accelerators and models with their derived decode latency and KV capacity."""
    _load_presets(presets)
    header = ("accelerator", "model", "tp", "ITL b=1 ms", "ITL b=64 ms", "KV tokens")
    rows = [header, *preset_rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        click.echo("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                              strict=True))))
