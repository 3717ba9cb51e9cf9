"""The one error boundary: every documented error class becomes its exit code and one line with its hint."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from harness import errors
from harness.cli.errors import guarded

ERROR_CLASSES = [cls for cls in vars(errors).values()
                 if isinstance(cls, type) and issubclass(cls, errors.HarnessError)]


def _command(exc: BaseException) -> click.Command:
    @click.command()
    @guarded
    def failing() -> None:
        raise exc

    return failing


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_each_error_class_exits_with_its_code_and_one_line(cls: type[errors.HarnessError]) -> None:
    result = CliRunner().invoke(_command(cls("scenarios/x.yaml: phases[0].load.rate: must be > 0")))
    expected = (errors.EXIT_USAGE if issubclass(cls, errors.UsageError)
                else errors.EXIT_NOTHING_OK if cls is errors.FigureError else errors.EXIT_HARNESS)
    assert result.exit_code == cls.exit_code == expected
    assert result.output == f"error: scenarios/x.yaml: phases[0].load.rate: must be > 0 ({cls.hint})\n"
    assert cls.hint and "\n" not in cls.hint


def test_usage_errors_cover_every_bad_input_kind() -> None:
    usage = {c.__name__ for c in ERROR_CLASSES if issubclass(c, errors.UsageError)}
    assert usage == {"UsageError", "ScenarioError", "TraceError", "TokenizerError", "PresetError"}


def test_ctrl_c_is_exit_130_and_other_exceptions_are_not_swallowed() -> None:
    stopped = CliRunner().invoke(_command(KeyboardInterrupt()))
    assert stopped.exit_code == errors.EXIT_STOPPED and "stopped" in stopped.output
    bug = CliRunner().invoke(_command(ValueError("a bug, not bad input")))
    assert bug.exit_code == 1 and isinstance(bug.exception, ValueError)  # no bare ValueError → exit 2


def test_the_top_level_help_cuts_no_description() -> None:
    from click.testing import CliRunner

    from harness.cli import main

    out = CliRunner().invoke(main, ["--help"], terminal_width=80).output
    commands = out.split("Commands:")[1].splitlines()
    assert commands and not any(line.rstrip().endswith("...") for line in commands)
    assert "init" in out and "run" in out


def test_sim_serve_takes_every_fault_status_it_lists() -> None:
    """`--fault-error-status 429` was refused ("Input should be 400, 429, 500 or 503"): the choice was handed on
    as text to a field of ints."""
    from typing import get_args

    from harness.config.simulator import FaultConfig
    from harness.sim.cli import _click_type

    annotation = FaultConfig.model_fields["error_status"].annotation
    choice = _click_type(annotation)
    for status in get_args(annotation):
        value = choice.convert(str(status), None, None)
        assert value == status and FaultConfig(error_status=value).error_status == status


def test_run_help_groups_its_flags_and_ends_with_examples() -> None:
    """`harness run --help` in sections (quick-run flags no longer after --shard/--workers/--ray), every option
    in one of them, and two command lines to copy."""
    from click.testing import CliRunner

    from harness.cli import main
    from harness.cli.run import RUN_GROUPS, run

    text = CliRunner().invoke(main, ["run", "--help"]).output
    order = [text.index(f"\n{title}:") for title in RUN_GROUPS]
    assert order == sorted(order) and text.index("\nExamples:") > order[-1]
    grouped = {name for names in RUN_GROUPS.values() for name in names}
    options = {p.name for p in run.params if p.param_type_name == "option" and not getattr(p, "hidden", False)}
    assert options - grouped == set()  # nothing falls into "Other options" but --help
    assert text.index("--rate") < text.index("--workers") and "harness run --endpoint http://" in text
