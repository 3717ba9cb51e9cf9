"""`harness sim ...`: run the simulated accelerator server on its own, list its presets."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import click
from pydantic import BaseModel, ValidationError

from harness import loop as event_loop
from harness.config.request_shape import parse_header
from harness.config.simulator import SimulatorConfig
from harness.devices.catalogue import catalogue, load_presets
from harness.devices.step import PerformanceModel, StepLoad
from harness.errors import PresetError
from harness.gctune import tune_for_timing
from harness.redact import variable_shown
from harness.sim.build import fit_problem, perf_model
from harness.sim.deployment import deployment_problem
from harness.sim.gate import Gate
from harness.sim.listen import serve


def _load_presets(paths: tuple[Path, ...]) -> None:
    for path in paths:
        try:
            load_presets(path)
        except PresetError as exc:
            raise click.BadParameter(str(exc), param_hint="--presets") from None


@click.group("sim")
def sim() -> None:
    """The bundled simulated accelerator server."""


_presets_option = click.option("--presets", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                               multiple=True, help="YAML file of extra accelerators and models (repeatable).")


_ALIASES = {"noise_sigma": ("--noise",), "weights": ("--dtype",)}  # the flags' earlier names


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class _LiteralChoice(click.Choice):  # type: ignore[type-arg]
    """Choices shown as text, handed on as the literal's own values (`--fault-error-status 429` is the int 429
    the configuration takes, not the text "429" it would refuse)."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = {str(v): v for v in values}
        super().__init__(list(self.values))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return self.values[str(super().convert(value, param, ctx))]


def _click_type(annotation: Any) -> Any:
    """A click type for a config field: choices for literals, else the scalar type itself."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Literal:
        return _LiteralChoice(tuple(args))
    for arg in args or [annotation]:
        if get_origin(arg) is Literal:
            return _LiteralChoice(get_args(arg))
        if arg in (int, float, str):
            return arg
        base = getattr(arg, "__origin__", None)
        if base in (int, float, str):
            return base
    return str


def _model_options(model: type[BaseModel], prefix: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One option per field of `model` (nested models under their field's prefix), defaults from the model:
    the flags cannot drift from the scenario's `simulator:` section."""
    decorators = []
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            decorators.append(_model_options(info.annotation, prefix=name.rstrip("s") + "_"))
            continue
        dest = prefix + name
        flag, aliases = _flag(dest), _ALIASES.get(dest, ())
        shown = "" if info.default is None else f" [default: {info.default}]"
        help_text = (info.description or "") + shown
        if info.annotation is bool:
            decorators.append(click.option(f"{flag}/--no-{flag[2:]}", dest, default=None, help=help_text))
        else:
            decorators.append(click.option(flag, *aliases, dest, type=_click_type(info.annotation), default=None,
                                           help=help_text))

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorate in reversed(decorators):
            fn = decorate(fn)
        return fn
    return apply


def simulator_config(options: dict[str, Any]) -> SimulatorConfig:
    """The config from the flags given (None: the model's default); a bad value names its flag."""
    given = {k: v for k, v in options.items() if v is not None}
    faults = {k.removeprefix("fault_"): v for k, v in given.items() if k.startswith("fault_")}
    top = {k: v for k, v in given.items() if not k.startswith("fault_")}
    faults.setdefault("seed", top.get("seed", 0))  # one --seed seeds the faults too unless --fault-seed says
    try:
        return SimulatorConfig.model_validate({**top, "faults": faults})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(part) for part in err["loc"]]
        name = "fault_" + loc[1] if loc[0] == "faults" and len(loc) > 1 else loc[0]
        raise click.BadParameter(str(err["msg"]).removeprefix("Value error, "), param_hint=_flag(name)) from None


@sim.command("serve", epilog="\b\nExamples:\n  harness sim serve --port 8000\n  harness sim serve --accelerator h200 "
             "--model llama-3.1-70b --tp 2 --stream-writes token")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="0 picks a free port; the URL is printed as JSON on the first line of stdout.")
@_presets_option
@click.option("--config-json", metavar="JSON", help="The whole configuration as JSON (the bundled simulator's "
              "way in); flags given beside it are ignored. One that cannot start is said on the URL's line, as "
              "{\"refused\": why}, exit 2.")
@click.option("--api-key-env", default=None, metavar="VAR",
              help="Require this environment variable's value as the bearer API key.")
@click.option("--require-header", "required", multiple=True, metavar="'NAME: VALUE'",
              help="As a gateway would: answer 401 to a request without this header and value (repeatable).")
@click.option("--record-fields", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Append each request's body fields beyond its prompt (sampling, engine options) to FILE, one "
                   "JSON line each.")
@_model_options(SimulatorConfig)
def serve_cmd(host: str, port: int, presets: tuple[Path, ...], config_json: str | None, api_key_env: str | None,
              required: tuple[str, ...], record_fields: Path | None, **options: Any) -> None:
    """Serve an OpenAI-compatible endpoint that emits tokens when a real engine would."""
    _load_presets(presets)
    try:
        gate = Gate(dict(parse_header(text) for text in required), record_fields)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--require-header") from None
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise click.BadParameter(f"environment variable {variable_shown(api_key_env)} is not set",
                                     param_hint="--api-key-env")
    if config_json is not None:
        try:
            cfg = SimulatorConfig.model_validate_json(config_json)
        except ValidationError as exc:
            raise click.BadParameter(str(exc.errors()[0]["msg"]), param_hint="--config-json") from None
    else:
        cfg = simulator_config(options)
    problem = deployment_problem(cfg)
    if problem is not None:
        if config_json is not None:  # started by a harness run: its refusal on the line the URL would take
            sys.stdout.write(json.dumps({"refused": problem}) + "\n")
            raise SystemExit(2)
        hint = "--prefill" if problem.startswith("the prefill pool") else "--model / --accelerator / --tp"
        raise click.BadParameter(problem, param_hint=hint)
    try:
        event_loop.run(_serve_forever(cfg, host, port, api_key, gate, live_lateness=config_json is None))
    except OSError as exc:  # the port is taken, or the host is not ours
        raise click.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror}", param_hint="--port") from None


async def _serve_forever(cfg: SimulatorConfig, host: str, port: int, api_key: str | None, gate: Gate,
                         live_lateness: bool) -> None:
    """Serve until SIGTERM (how a harness run stops its bundled simulator) or Ctrl-C, then stop cleanly: the
    server's last words (how late its steps were) are said on the way out."""
    runner, url = await serve(cfg, host, port, api_key, gate, live_lateness)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    # Smaller young collections than the harness's: at 100,000 objects one took ~10 ms, and requests arriving
    # behind it were stamped late (constant 400 req/s: server-side gap CV 0.064 → 0.040–0.044 at 10,000),
    # while 2,048 streams still keep every step on time at 40 ms.
    tune_for_timing(young=10_000)
    said = {"slowdown": cfg.slowdown} if cfg.slowdown != 1 else {}
    sys.stdout.write(json.dumps({"url": url, "model": cfg.name, **said}) + "\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _fitting(accelerator: str, model: str) -> tuple[int, PerformanceModel, int] | None:
    """The smallest TP (number of devices) vLLM would start the model on with its defaults: the weights, and a
    KV cache for one request of the model's max_model_len, at the device's batch defaults."""
    for tp in catalogue().devices[accelerator].device_counts():
        cfg = SimulatorConfig(accelerator=accelerator, model=model, tp=tp)
        if fit_problem(cfg) is None:
            perf, kv_tokens = perf_model(cfg)
            return tp, perf, kv_tokens
    return None


def preset_rows() -> list[tuple[str, ...]]:
    """Per accelerator and model: the smallest TP that fits, the link and the all-reduce at that TP, ITL at
    batch 1 and 64 (1k context), KV tokens."""
    rows: list[tuple[str, ...]] = []
    for acc in catalogue().devices:
        link = catalogue().devices[acc].link_text(1)
        for model in catalogue().models:
            fitting = _fitting(acc, model)
            if fitting is None:
                rows.append((acc, model, "-", link, "", "does not fit", "", ""))
                continue
            tp, perf, kv_tokens = fitting
            itl = [perf.step_seconds(StepLoad(tokens=b, seqs=b, decodes=b, decode_context=b * 1024)) * 1e3
                   for b in (1, 64)]
            rows.append((acc, model, str(tp), link, catalogue().devices[acc].allreduce(tp), f"{itl[0]:.1f}",
                         f"{itl[1]:.1f}", f"{kv_tokens:,}"))
    return rows




@sim.command("presets")
@_presets_option
@click.option("--show", "name", metavar="NAME", help="Print one accelerator's or model's figures (TFLOP/s, HBM, "
              "memory, link; layers, heads, parameters) and its rows of the table.")
def presets_cmd(presets: tuple[Path, ...], name: str | None) -> None:
    """List accelerators and models with their derived decode latency and KV capacity."""
    _load_presets(presets)
    header = ("accelerator", "model", "tp", "link", "all-reduce", "ITL b=1 ms", "ITL b=64 ms", "KV tokens")
    rows = [header, *preset_rows()]
    if name is not None:
        for line in preset_figures(name):
            click.echo(line)
        rows = [header, *(r for r in rows[1:] if name in r[:2])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        cells = zip(row, widths, strict=True)
        click.echo("  ".join(c.ljust(w) if i in (0, 1, 3, 4) else c.rjust(w) for i, (c, w) in enumerate(cells)))


def preset_figures(name: str) -> list[str]:
    """A preset's own figures, a line each, as `--presets` files spell them; a BadParameter naming the known
    names when it is none."""
    preset: Any = catalogue().devices.get(name) or catalogue().models.get(name)
    if preset is None:
        known = ", ".join(sorted([*catalogue().devices, *catalogue().models]))
        raise click.BadParameter(f"{name!r} is no accelerator or model; known: {known}", param_hint="--show")
    kind = "model" if name in catalogue().models else f"accelerator ({type(preset).__name__})"
    lines = [f"{name}: {kind}"]
    lines += [f"  {f.name}: {getattr(preset, f.name)}" for f in dataclasses.fields(preset) if f.name != "name"]
    if kind != "model":
        lines.append("  (a slower one on demand: harness sim serve --slowdown 1.2, every step 1.2× longer)")
    return [*lines, ""]
