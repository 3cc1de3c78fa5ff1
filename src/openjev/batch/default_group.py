"""A command group that runs its default command when the first word names none of its commands, so
`openjev eval FILE` (the default, `run`) and `openjev eval compare A B` live side by side. Its help
shows the group's commands and then the default command's own usage and options, as `openjev eval
FILE` takes them."""

from __future__ import annotations

import click
from typer.core import TyperGroup


class DefaultCommandGroup(TyperGroup):
    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        default = self.commands[self.default_command]
        default.format_help(click.Context(default, info_name=ctx.info_name, parent=ctx.parent), formatter)
