"""A click command whose `--help` lists its options in named groups (quick run, endpoint, output, scale-out,
…) rather than one flat list, with examples after them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import click


class GroupedCommand(click.Command):
    """`groups`: section title → the options' destination names, in order; options in no group come last,
    under "Other options". `examples`: command lines shown after the options."""

    def __init__(self, *args: object, groups: Mapping[str, Sequence[str]] | None = None,
                 examples: Sequence[str] = (), **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.groups, self.examples = groups or {}, examples

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx) if isinstance(p, click.Option)}
        placed: set[str | None] = set()
        for title, names in self.groups.items():
            rows = [row for name in names if (row := records.get(name)) is not None]
            placed.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [row for name, row in records.items() if name not in placed and row is not None]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self.examples:
            with formatter.section("Examples"):
                for line in self.examples:  # as typed: a command line is not rewrapped
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")
        super().format_epilog(ctx, formatter)


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, as typed (click's \\b keeps them from being
    rewrapped)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
