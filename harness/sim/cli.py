"""`harness sim ...`: run the simulated accelerator server on its own."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import click

from harness.sim.presets import ACCELERATORS, MODELS
from harness.sim.server import SimConfig, serve


@click.group("sim")
def sim() -> None:
    """The bundled simulated accelerator server."""


@sim.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port; the URL is printed as JSON on the first line of stdout.")
@click.option("--accelerator", type=click.Choice(sorted(ACCELERATORS)), default="h100-sxm", show_default=True)
@click.option("--model", type=click.Choice(sorted(MODELS)), default="llama-3.1-8b", show_default=True)
@click.option("--served-model-name", default=None, help="Model name clients must send (default: --model).")
@click.option("--tp", type=click.IntRange(1, 64), default=1, show_default=True, help="Tensor parallelism.")
@click.option("--max-num-seqs", type=click.IntRange(1), default=256, show_default=True)
@click.option("--max-num-batched-tokens", type=click.IntRange(1), default=8192, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--noise", "noise_sigma", type=click.FloatRange(0, 1), default=0.03, show_default=True,
              help="Multiplicative step-time noise (lognormal sigma).")
@click.option("--api-key-env", default=None, metavar="VAR",
              help="Require this environment variable's value as the bearer API key.")
def serve_cmd(host: str, port: int, accelerator: str, model: str, served_model_name: str | None, tp: int,
              max_num_seqs: int, max_num_batched_tokens: int, seed: int, noise_sigma: float,
              api_key_env: str | None) -> None:
    """Serve an OpenAI-compatible endpoint backed by the step engine."""
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.BadParameter(f"environment variable {api_key_env} is not set", param_hint="--api-key-env")
    cfg = SimConfig(accelerator=accelerator, model=model, served_model_name=served_model_name, tp=tp,
                    max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, seed=seed,
                    noise_sigma=noise_sigma, api_key=api_key)
    asyncio.run(_serve_forever(cfg, host, port))


async def _serve_forever(cfg: SimConfig, host: str, port: int) -> None:
    runner, url = await serve(cfg, host, port)
    sys.stdout.write(json.dumps({"url": url, "model": cfg.name}) + "\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
