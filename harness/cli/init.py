"""`harness init`: a commented scenario to start from."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.errors import guarded
from harness.cli.grouped import examples
from harness.config.template import scenario_template
from harness.errors import UsageError

_EXAMPLES1 = examples(
    'harness init my-scenario.yaml --endpoint http://localhost:8000/v1 --model my-model',
    'harness init',
)


@click.command(short_help="Write a commented scenario to start from.", epilog=_EXAMPLES1)
@click.argument("path", type=click.Path(path_type=Path, dir_okay=False), default="scenario.yaml")
@click.option("--endpoint", metavar="URL", help="Put this OpenAI base URL (…/v1) in the scenario.")
@click.option("--model", help="Put this model name in the scenario.")
@guarded
def init(path: Path, endpoint: str | None, model: str | None) -> None:
    """Write a commented scenario to PATH (default scenario.yaml) to start from; never overwrites."""
    if path.exists():
        raise UsageError(f"{path} exists already; give another path")
    try:
        path.write_text(scenario_template(str(path), endpoint, model), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None
    click.echo(f"wrote {path}; run it with: harness run {path}")
