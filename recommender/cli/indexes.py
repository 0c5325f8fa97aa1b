"""`papers indexes`, `cache` and `models`: the indexes, the embedding cache and the models known."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..render.tables import FORMATS
from .errors import CommandGroup, library_errors


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
@library_errors
def models(fmt):
    """The models `--model` knows by name: installed or not, and what each costs.

    Any sentence-transformers model folder works as --model too; these are the
    ones whose costs and relevance were measured.

    Examples:

    \b
        papers models
        papers models --format json
    """
    from ..embed.models import list_models
    from ..render.models import render_models

    click.echo(render_models(list_models(), fmt), nl=False)


@click.group(cls=CommandGroup, invoke_without_command=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.pass_context
@library_errors
def indexes(ctx, fmt):
    """The indexes in the index home (name, papers, model, size); `rm` and `mv` remove and
    rename one.

    The home is $PAPERS_HOME if set, else ./indexes/ when it exists (a checkout),
    else the user data folder.

    Examples:

    \b
        papers indexes
        papers indexes --format json
        papers indexes rm old-arxiv
        papers indexes mv default iclr2020
        PAPERS_HOME=/data/papers papers indexes
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..index.catalogue import list_indexes
    from ..index.home import index_home
    from ..render.indexes import render_indexes

    home = index_home()
    click.echo(render_indexes(list_indexes(home.path), home.describe(), fmt), nl=False)


@click.group(cls=CommandGroup)
def cache():
    """The embedding cache shared by every index (in the user cache folder, or $PAPERS_CACHE).

    Vectors are kept by the model's files, the chunking and the text, so a second index
    over the same papers encodes only the new ones. The same folder keeps the model exports,
    compiled models and unpacked models that builds and queries share; `cache info` lists
    them too.

    Examples:

    \b
        papers cache info
        papers cache info --format json
        papers cache clear
    """


@cache.command(name="info")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@library_errors
def cache_info(fmt):
    """Where the embedding cache is, its size and how many vectors it holds; and what else the
    cache folder keeps, each kind with its entries and size."""
    from ..embed.embedding_cache import embedding_cache_info
    from ..render.indexes import render_cache

    click.echo(render_cache(embedding_cache_info(), fmt), nl=False)


@cache.command(name="clear")
@library_errors
def cache_clear():
    """Empty the embedding cache (the next builds encode their papers again; indexes are
    untouched)."""
    from ..embed.embedding_cache import clear_embedding_cache
    from ..render.indexes import render_cache_cleared

    click.echo(render_cache_cleared(clear_embedding_cache()), nl=False)


@indexes.command(name="rm")
@click.argument("name", metavar="NAME|PATH")
@click.option(
    "--with-tags",
    is_flag=True,
    help=(
        "Remove the index's tags (made by `papers serve`) too; without it they are kept "
        "(asked on a terminal)."
    ),
)
@library_errors
def indexes_rm(name, with_tags):
    """Remove an index: what its builds made, nothing else (a folder that is not an index is
    refused).
    Its tags are kept unless --with-tags; a link to an index is removed itself, never followed.

    Examples:

    \b
        papers indexes rm old-arxiv
        papers indexes rm old-arxiv --with-tags
    """
    from ..index.catalogue import remove_index

    def confirm_tags(path: Path) -> bool:
        return click.confirm(
            f"index {name} has tags ({path}): remove them too?", default=False, err=True
        )

    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    removal = remove_index(
        name, with_tags=with_tags, confirm_tags=confirm_tags if interactive else None
    )
    index_dir, kept = removal.folder, removal.kept
    if removal.link_target is not None:
        click.echo(
            f"removed the link {index_dir}; the index it points to ({removal.link_target}) is kept "
            "(give its path to remove it)",
            err=True,
        )
        return
    notes = []
    if kept:
        notes.append(
            "kept what papers did not make there: "
            + ", ".join(kept[:5])
            + (f" and {len(kept) - 5} more" if len(kept) > 5 else "")
        )
    if removal.tags_kept:
        notes.append(f"kept its tags ({index_dir / 'tags.sqlite'}): add --with-tags to remove them")
    click.echo(
        f"removed index {name} ({index_dir})" + "".join(f"; {note}" for note in notes), err=True
    )


@indexes.command(name="mv")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@library_errors
def indexes_mv(old, new):
    """Rename an index (a reader that has it open keeps reading it).

    Examples:

    \b
        papers indexes mv default iclr2020
    """
    from ..index.catalogue import rename_index

    old_dir, new_dir = rename_index(old, new)
    click.echo(f"renamed index {old_dir} to {new_dir}", err=True)
