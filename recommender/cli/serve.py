"""`papers serve`: the index as a local web app and an HTTP API."""

from __future__ import annotations

import click

from .common import index_option
from .errors import library_errors


@click.command()
@index_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any other than loopback makes writes (tags) need a token.",
)
@click.option(
    "--port", type=int, default=8000, show_default=True, help="Port to listen on (0: a free one)."
)
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help=(
        "Worker processes (uvicorn's supervisor restarts one that dies); they share the index's"
        " pages."
    ),
)
@click.option(
    "--token",
    default=None,
    help=(
        "Token that writes need (default: $PAPERS_TOKEN; off loopback one is generated). Prefer"
        " $PAPERS_TOKEN or --token-file: every user of the host can read a command line."
    ),
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the token from the first line of this file.",
)
@library_errors
def serve(index, host, port, workers, token, token_file):
    """The index as a local web app and an HTTP API (needs papers-like[serve]).

    Pages at /, the API under /api (described at /openapi.json and /docs).
    Runs until Ctrl-C; a rebuild of the index is picked up without a restart.

    Examples:

    \b
        papers serve
        papers serve --index arxiv-lg --port 8080 --workers 2
        papers serve --host 0.0.0.0 --token-file ~/.papers-token
    """
    try:
        from ..serve.server import serve as run
    except ImportError as error:
        from ..errors import InputError, install_command

        raise InputError(
            f"papers serve needs the serve extra ({error.name} is missing): "
            f"{install_command('serve')}"
        ) from None
    if token is not None:
        click.echo(
            "note: a token given with --token is visible to every user of this host (ps, /proc): "
            "prefer $PAPERS_TOKEN or --token-file",
            err=True,
        )
    run(
        index,
        host=host,
        port=port,
        workers=workers,
        token=token,
        token_file=token_file,
        announce=lambda line: click.echo(line),
    )
