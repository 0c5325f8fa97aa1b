"""The `papers` command: each subcommand parses, calls one library function, prints.

The `main` group is here; each module of this package holds one group of commands.
"""

from __future__ import annotations

import click

from .. import DISTRIBUTION, __version__
from . import build, evaluate, fetch, indexes, lookups, reading_group, serve, tags
from .errors import CommandGroup


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__,
    package_name=DISTRIBUTION,
    message="papers %(version)s (the %(package)s distribution)",
)
def main():
    """Find related research papers: `papers build`, then `papers like ID` or `papers search
    TEXT`."""


for _command in (
    build.build,
    build.add,
    fetch.fetch,
    build.remove,
    lookups.like,
    tags.feed,
    tags.tags,
    lookups.search,
    lookups.show,
    lookups.list_,
    lookups.info,
    indexes.models,
    indexes.indexes,
    indexes.cache,
    evaluate.evaluate,
    reading_group.related_work,
    reading_group.sessions,
    reading_group.map_,
    serve.serve,
):
    main.add_command(_command)
