"""What several commands share: the default scenario, the API key, options spelt once."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from harness.config.scenario import Scenario, load_scenario
from harness.config.units import duration_seconds
from harness.devices.catalogue import load_presets
from harness.errors import PresetError, UsageError
from harness.redact import variable_shown
from harness.voice import Voice

REPO_SCENARIOS = Path(__file__).resolve().parent.parent.parent / "scenarios"

# --result-dir (vLLM's bench) and --artifact-dir (AIPerf) are the same folder under the peers' names.
reports_dir_option = click.option("--reports-dir", "--result-dir", "--artifact-dir", "reports_dir",
                                  type=click.Path(path_type=Path, file_okay=False), default=Path("reports"),
                                  show_default=True, help="Where each run's folder goes.")
api_key_env_option = click.option("--api-key-env", metavar="VAR", help="Environment variable holding the API key "
                                  "(default: OPENAI_API_KEY if set). The key itself is never printed or saved.")
def _load_presets(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:
        try:
            ctx.meta["presets"] = (value, load_presets(value))
        except PresetError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


def on_presets(scenario: Scenario, voice: Voice) -> Scenario:
    """The scenario on the accelerator a --presets file brought, when it names none and the file brings one (a
    fitted twin); said either way, so a prediction never runs silently on another accelerator than meant."""
    path, added = click.get_current_context().meta.get("presets", (None, []))
    sim = scenario.simulator
    if path is None or not added or sim.accelerator in added:
        return scenario
    if "accelerator" not in sim.model_fields_set and len(added) == 1:
        voice.say(f"simulating {added[0]} from {path} (the scenario names no accelerator)")
        return scenario.changed(simulator=sim.changed(accelerator=added[0]))
    voice.say(f"simulating {sim.accelerator} (the scenario's simulator.accelerator), not {', '.join(added)} from "
              f"{path}: name it there (simulator: {{accelerator: {added[0]}}}) to use it")
    return scenario


# Eager: the presets are known before the scenario naming them is read.
presets_option = click.option("--presets", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                              callback=_load_presets, is_eager=True, expose_value=False,
                              help="YAML file of extra accelerators and models (a `harness sim fit` twin), for "
                                   "the scenario's simulator section.")
scenario_argument = click.argument("scenario_path", required=False, type=click.Path(path_type=Path, dir_okay=False))


def scenario_or_default(path: Path | None) -> Scenario:
    """The scenario at `path`, or the quickstart (from the working directory, else the installed
    repository)."""
    if path is None:
        local = Path("scenarios/quickstart.yaml")
        path = local if local.exists() else REPO_SCENARIOS / "quickstart.yaml"
    return load_scenario(path)


def api_key(flag_env: str | None, scenario_env: str | None) -> str | None:
    name = flag_env or scenario_env
    if name is None:
        return os.environ.get("OPENAI_API_KEY") or None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):  # a key given where its variable's name belongs
        raise click.BadParameter("takes the NAME of the environment variable that holds the key (e.g. "
                                 "OPENAI_API_KEY); what was given is not a variable name and is not shown",
                                 param_hint="--api-key-env" if flag_env else "endpoint.api_key_env")
    hint = "--api-key-env" if flag_env else "endpoint.api_key_env"
    shown = variable_shown(name)  # a token can pass for a variable's name (hf_…, ghp_…): never echoed whole
    value = os.environ.get(name)
    if not value:
        raise click.BadParameter(f"environment variable {shown} is not set", param_hint=hint)
    if any(c in value for c in "\r\n\0"):
        raise click.BadParameter(f"the key in environment variable {shown} holds a line break or NUL: a header "
                                 "cannot carry it (a file read with its newline?)", param_hint=hint)
    return value


def writable_dir(path: Path, flag: str) -> Path:
    """`path`, created if need be and proven writable before anything is sent."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".harness-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there: {exc.strerror}") from None
    return path


class Duration(click.ParamType):  # type: ignore[type-arg]
    """A duration flag, `30s`, `5m`, `500ms` or a number of seconds, as in scenario files; in seconds."""

    name = "duration"

    def __init__(self, minimum_s: float = 0.0) -> None:
        self.minimum_s = minimum_s

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = duration_seconds(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if seconds < self.minimum_s:
            self.fail(f"{value!r} is under {self.minimum_s:g} s", param, ctx)
        return seconds
