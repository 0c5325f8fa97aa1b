"""The `papers` command: each subcommand parses, calls one library function, prints.

The `main` group is here; each module of this package holds one group of commands, imported
when one of its commands runs (or help lists them), so that a cold `papers like` loads only the
command it runs.
"""

from __future__ import annotations

import importlib

import click

from .. import DISTRIBUTION, __version__
from .errors import CommandGroup

#: Each command by name, and where it is defined: "module:function" in this package.
COMMANDS = {
    "build": "build:build",
    "add": "build:add",
    "fetch": "fetch:fetch",
    "remove": "build:remove",
    "like": "lookups:like",
    "feed": "tags:feed",
    "tags": "tags:tags",
    "search": "lookups:search",
    "show": "lookups:show",
    "list": "lookups:list_",
    "info": "lookups:info",
    "models": "indexes:models",
    "indexes": "indexes:indexes",
    "cache": "indexes:cache",
    "evaluate": "evaluate:evaluate",
    "related-work": "reading_group:related_work",
    "sessions": "reading_group:sessions",
    "map": "reading_group:map_",
    "serve": "serve:serve",
}


class Commands(CommandGroup):
    """The `main` group: a command's module is imported when the command is asked for."""

    def list_commands(self, ctx: click.Context | None) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            module, function = COMMANDS[name].split(":")
            command = getattr(importlib.import_module(f".{module}", __name__), function)
            self.add_command(command, name)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as error:  # close matches among every command
            raise click.exceptions.NoSuchCommand(
                error.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    package_name=DISTRIBUTION,
    message="papers %(version)s (the %(package)s distribution)",
)
def main():
    """Find related research papers: `papers build`, then `papers like ID` or `papers search
    TEXT`."""
