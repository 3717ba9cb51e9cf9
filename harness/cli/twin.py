"""`harness sim fit` and `harness sim validate`: a simulator fitted to measured runs of one endpoint."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.devices.fitted import FittedAccelerator
from harness.twin.fit import fit_runs, known_model, load_twin
from harness.twin.validate import ValidationRow, fit_warnings, outside_fitted, validate_run

_run_dir = click.Path(path_type=Path, file_okay=False, exists=True)


def _print_validation(rows: list[ValidationRow]) -> None:
    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f}"

    click.echo(f"{'run / phase':<44} {'figure':<16} {'measured':>10} {'predicted':>10} {'error':>8}")
    for r in rows:
        where = f"{Path(r['run']).name} / {r['phase']}"
        error = "-" if r["error"] is None else f"{r['error']:+.1%}" + ("*" if r["untrusted"] else "")
        click.echo(f"{where:<44} {r['figure']:<16} {num(r['measured']):>10} {num(r['predicted']):>10} {error:>8}")
    if any(r["untrusted"] for r in rows):
        click.echo("* the client could have moved the figure measured (its run was client limited): not judged")


_EXAMPLES1 = examples(
    'harness sim fit runs/rate-4/* runs/rate-16/* --out staging.yaml',
)


@click.command("fit", short_help="Fit the simulator's step times to measured runs of one endpoint.", epilog=_EXAMPLES1)
@click.argument("run_dirs", nargs=-1, required=True, type=_run_dir)
@click.option("--out", "out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The preset file to write (use with --presets on sim serve, predict, search).")
@click.option("--name", default="twin", show_default=True, help="The fitted accelerator's name in the preset.")
@click.option("--model", help="Model preset for the twin's context length (default: each run's simulator model).")
@click.option("--slots", type=click.IntRange(min=1), help="Requests the engine decodes at once (llama-server's "
              "-np); default: the most it ran while others waited, where the runs scraped that, else none.")
@click.option("--batch-tokens", type=click.IntRange(min=1), help="Tokens one step processes at most (llama.cpp's "
              "n_batch, vLLM's max_num_batched_tokens): prompts are processed in chunks of it.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit and its errors as JSON.")
@guarded
def fit_cmd(run_dirs: tuple[Path, ...], out: Path, name: str, model: str | None, slots: int | None,
            batch_tokens: int | None, as_json: bool) -> None:
    """Fit a `kind: fitted` accelerator to RUN_DIRS (two or more load levels of one endpoint), write it to
    --out, and replay each run on it to show the fit's error; say where the fit's assumptions failed."""
    fit = fit_runs(run_dirs, name, known_model(model), slots, batch_tokens)
    out.write_text(fit.preset_yaml(run_dirs), encoding="utf-8")
    accelerator = load_twin(out, name)
    rows = [row for d in run_dirs for row in validate_run(d, accelerator, known_model(model))]
    warnings = fit_warnings(fit, rows)
    if as_json:
        click.echo(json.dumps({"accelerator": asdict(fit.accelerator), "samples": fit.samples,
                               "kv_measured": fit.kv_measured, "errors": rows, "warnings": warnings}, indent=2))
        return
    a = fit.accelerator
    shape = (f"; {a.slots} slots" if a.slots else "") + (f", steps of {a.batch_tokens} tokens" if a.batch_tokens
                                                          else "") + ("; first token one step after its prompt's"
                                                                      if a.first_token_step else "")
    click.echo(f"fitted {a.name} on {fit.samples:,} step gaps: {step_model(a)} + {a.request_ms:.2f} ms a request "
               f"outside the steps; KV {a.kv_tokens:,} tokens{fit.kv_note}{shape}")
    click.echo(f"wrote {out}\n")
    _print_validation(rows)
    for line in warnings:
        click.echo(f"warning: {line}", err=True)


def step_model(a: FittedAccelerator) -> str:
    """The fitted step model in words."""
    if a.decode_ms:
        table = ", ".join(f"{v:.1f}" for v in a.decode_ms)
        grown = [f" + {a.prompt_attn_ms:.2f} ms per (1k tokens)² of attention within them" if a.prompt_attn_ms else "",
                 f", {a.prompt_together:+.0%} for each other prompt beside it" if a.prompt_together else "",
                 f", {a.prompt_beside:+.0%} for each stream decoding beside a prompt" if a.prompt_beside else ""]
        return (f"decode steps of 1–{len(a.decode_ms)} sequences [{table}] ms (+{a.per_seq_ms:.2f} ms a sequence "
                f"past them) + {a.prompt_step_ms:.2f} ms a step with prompts in it + {a.per_ktoken_ms:.2f} ms per 1k "
                f"prompt tokens{''.join(grown)}")
    return (f"step {a.step_ms:.2f} ms + {a.per_seq_ms:.3f} ms a sequence + {a.per_context_ktoken_ms:.3f} ms per 1k "
            f"context tokens + hypot({a.weights_ms:.2f} ms, {a.per_ktoken_ms:.2f} ms per 1k tokens) + "
            f"{a.prompt_step_ms:.2f} ms a step with prompts in it")


_EXAMPLES2 = examples(
    'harness sim validate staging.yaml runs/rate-10/*',
)


@click.command("validate", short_help="Replay a run on a fitted preset and compare with what it measured.",
               epilog=_EXAMPLES2)
@click.argument("preset", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.argument("run_dirs", nargs=-1, required=True, type=_run_dir)
@click.option("--accelerator", help="The preset's accelerator (default: its only fitted one).")
@click.option("--model", help="Model preset for the twin (default: the run's simulator model).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@guarded
def validate_cmd(preset: Path, run_dirs: tuple[Path, ...], accelerator: str | None, model: str | None,
                 as_json: bool) -> None:
    """Replay each of RUN_DIRS (its own scenario, seeds and load) in virtual time on PRESET's accelerator and
    print predicted against measured TTFT p50/p99, ITL p50 and output tokens/s, with the errors."""
    name = load_twin(preset, accelerator)
    rows = [row for d in run_dirs for row in validate_run(d, name, known_model(model))]
    beyond = [line for d in run_dirs for line in outside_fitted(d, name)]
    if as_json:
        click.echo(json.dumps({"errors": rows, "outside_fitted": beyond}, indent=2))
        return
    _print_validation(rows)
    for line in beyond:
        click.echo(f"note: {line}: an extrapolation, not a validation", err=True)
