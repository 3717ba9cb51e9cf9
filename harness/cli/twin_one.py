"""`harness sim twin URL`: a twin of an endpoint from one command — its runs designed, fitted and validated on
held-out loads (harness/twin/make.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, replace
from pathlib import Path

import click

from harness.cli.common import Duration, api_key, api_key_env_option
from harness.cli.errors import ECHO, fail, guarded
from harness.cli.grouped import examples
from harness.cli.request_flags import RequestFlags, endpoint_url, request_options, with_request_flags
from harness.cli.twin import step_model
from harness.client.backend import Endpoint
from harness.config.scenario import parse_scenario
from harness.errors import EXIT_NO_VERDICT, EXIT_REGRESSION, UsageError
from harness.run.target import target
from harness.twin.design import RUN_OUTPUT, RUN_PROMPT, minutes
from harness.twin.discover import EngineInfo
from harness.twin.heldout import HeldFigure
from harness.twin.make import FATAL, Measured, TwinResult, engine_info, judge, measure
from harness.twin.slots import BURST, burst_slots
from harness.voice import Voice

_EXAMPLES = examples(
    'harness sim twin http://127.0.0.1:8080 --out llama.yaml',
    'harness sim twin http://staging:8000/v1 --slots 256 --budget 10m --out staging.yaml --json',
)


@click.command("twin", short_help="Design runs against an endpoint, fit a twin of it and validate it on held-out "
               "loads.", epilog=_EXAMPLES)
@click.argument("url")
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The preset file to write (use with --presets on sim serve, predict, search, run).")
@click.option("--slots", type=click.IntRange(min=1), help="Requests the engine decodes at once (vLLM's "
              "max_num_seqs); default: what the endpoint says (llama-server's /props, SGLang's /get_server_info).")
@click.option("--budget", type=Duration(), default="15m", show_default=True, metavar="DURATION",
              help="At most this long in all; the design is shortened to fit, or refused.")
@click.option("--name", default="twin", show_default=True, help="The fitted accelerator's name in the preset.")
@click.option("--model", help="The served model to drive (default: the first the endpoint lists).")
@click.option("--workdir", type=click.Path(path_type=Path, file_okay=False),
              help="Where the runs go (default: next to --out, OUT.runs/).")
@click.option("--tokenizer", type=click.Choice(["server", "local"]), default="server", show_default=True,
              help="server: prompts of exact length, counted by the endpoint's /tokenize (llama-server, vLLM, the "
              "bundled simulator); local: the harness's own count, for endpoints without one.")
@api_key_env_option
@request_options
@click.option("--json", "as_json", is_flag=True, help="Print the validation as JSON (the shape `sim validate "
              "--json` prints, with the findings and the verdict).")
@guarded
def twin_cmd(url: str, out: Path, slots: int | None, budget: float, name: str, model: str | None,
             workdir: Path | None, tokenizer: str, api_key_env: str | None, as_json: bool, request: RequestFlags
             ) -> None:
    """Make a twin of the endpoint at URL: discover its slots, probe one request, design fitting runs (a
    closed-loop ramp over every batch size, prompts alone, a Poisson load) and held-out ones (another Poisson
    rate, a closed loop and a batch at the slot count), run them, fit, and validate. Exits 0 only when every
    held-out figure holds (±15% on TTFT and ITL p50 and output tokens/s, ±30% on TTFT p99, or the engine's own
    difference between two runs of that load where wider) and the fit's shape is one an engine can have; else
    99, naming what does not hold."""

    base, api = endpoint_url(url)
    assert base is not None
    scenario = parse_scenario({"name": "twin", "workload": {"prompt_tokens": RUN_PROMPT, "output_tokens": RUN_OUTPUT},
                               "phases": [{"name": "probe", "load": {"type": "concurrency", "concurrency": 1,
                                                                      "requests": 1}}]}, "sim twin")
    scenario, headers = with_request_flags(scenario, request, ECHO, api)
    key = api_key(api_key_env, None)
    workdir = workdir or out.with_name(out.name + ".runs")

    async def go() -> Measured:
        async with target(scenario, url=base, model=model, api=None, api_key=key, headers=headers,
                          voice=ECHO) as (endpoint, _):
            info, count = await _slots(endpoint, slots, workdir, tokenizer_of(tokenizer), ECHO)
            return await measure(endpoint, info, count, budget, workdir, tokenizer_of(tokenizer), ECHO)

    result = judge(asyncio.run(go()), out, name)
    _report(result, as_json)
    what = [f.why() for f in result.missed] + [f.code for f in result.findings if f.code in FATAL]
    if result.verdict == "no verdict":
        raise fail(f"no verdict: the client limited {len(result.limited)} of the runs ({', '.join(result.limited)}): "
                   f"what missed ({'; '.join(what)}) may be its own lateness; run it on a quieter machine",
                   EXIT_NO_VERDICT)
    if not result.holds:
        raise fail(f"the twin does not hold: {'; '.join(what)} (see the findings above)", EXIT_REGRESSION)


async def _slots(endpoint: Endpoint, slots: int | None, workdir: Path, tokenizer: str, voice: Voice
                 ) -> tuple[EngineInfo, int]:
    """What the endpoint says of its engine, and its slots: --slots, what it says, or what a burst shows."""
    info = await engine_info(endpoint)
    count = slots or info.slots
    if count is None and info.counts_running:
        workdir.mkdir(parents=True, exist_ok=True)
        count = await burst_slots(endpoint, workdir / "00-slots", tokenizer, voice)
        info = replace(info, slots=count, source=f"a burst of {BURST} measured it")
    if count is None:
        raise UsageError("--slots: the endpoint does not say how many requests it decodes at once (no llama-server "
                         "/props, no SGLang /get_server_info, no running gauge a burst could read): give --slots N")
    if slots is not None and info.slots is not None and slots != info.slots:
        voice.say(f"--slots {slots}, where the endpoint says {info.slots} ({info.source}): taking --slots")
    return info, count


def tokenizer_of(choice: str) -> str:
    """The runs' `workload.tokenizer`: the endpoint's /tokenize, or the harness's words."""
    return "server" if choice == "server" else "words"


def _report(result: TwinResult, as_json: bool) -> None:
    a = result.fit.accelerator
    if as_json:
        click.echo(json.dumps({"errors": result.held, "held_out": [_row(f) for f in result.figures],
                               "outside_fitted": result.outside, "fit_errors": result.own,
                               "findings": [asdict(f) for f in result.findings], "holds": result.holds,
                               "verdict": result.verdict, "client_limited": result.limited,
                               "preset": str(result.preset), "accelerator": asdict(a),
                               "estimate_s": round(result.plan.estimate_s, 1)}, indent=2))
        return
    click.echo(f"fitted {a.name}: {step_model(a)} + {a.request_ms:.2f} ms a request outside the steps; "
               f"{a.slots or '?'} slots; KV {a.kv_tokens:,} tokens{result.fit.kv_note}")
    click.echo(f"wrote {result.preset} (envelope: {_span(a.fitted_batch)} sequences a step, "
               f"{_span(a.fitted_rps)} req/s, prompts of {_span(a.fitted_prompt_tokens)} tokens)\n")
    click.echo("held out (loads at the slot count run twice; each held to its bound or the engine's own difference "
               "between the two, where wider):")
    click.echo(f"{'load':<16} {'figure':<16} {'measured':>20} {'twin':>10} {'error':>8} {'held to':>8}")
    for f in result.figures:
        runs = " / ".join(f"{m:,.1f}" for m in f.measured)
        mark = "" if f.holds else "  ✗ unsteady" if f.unsteady else "  ✗"
        click.echo(f"{f.load:<16} {f.figure:<16} {runs:>20} {f.predicted:>10,.1f} {f.error:>+8.1%} "
                   f"{f.tolerance:>7.0%}{mark}")
    for finding in result.findings:
        click.echo(f"finding {finding}", err=True)
    for line in result.outside:
        click.echo(f"note: {line}: an extrapolation, not a validation", err=True)
    for run, why in result.limited.items():
        click.echo(f"client limited {run}: {why}", err=True)
    verdict = {"holds": "holds", "no verdict": "cannot be judged (the client limited runs)",
               "does not hold": "does NOT hold"}[result.verdict]
    click.echo(f"\nthe twin {verdict} on its held-out loads (±15% p50 and tokens/s, ±30% p99, or the engine's own "
               f"difference); design estimated {minutes(result.plan.estimate_s)}")


def _row(f: HeldFigure) -> dict[str, object]:
    return {**asdict(f), "tolerance": f.tolerance, "holds": f.holds, "unsteady": f.unsteady}


def _span(values: list[int] | list[float] | None) -> str:
    return "?" if values is None else f"{values[0]:g}–{values[1]:g}"
