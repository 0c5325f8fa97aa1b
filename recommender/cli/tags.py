"""`papers tags` and `papers feed`: the user's tags of papers, and the new papers ranked by them."""

from __future__ import annotations

import sys

import click

from ..render.tables import plural
from .common import (
    format_option,
    index_option,
    opened_index,
    out_option,
    output_file,
    quiet_option,
    table_width,
)
from .errors import library_errors


@click.command()
@click.option(
    "--tag",
    "tags",
    multiple=True,
    required=True,
    metavar="TAG",
    help="The tag whose profile ranks the feed (repeatable: the tags as one profile).",
)
@click.option(
    "--since",
    default="last",
    show_default=True,
    metavar="DATE|last",
    help=(
        "Papers added since the tag's feed was last written (last), "
        "or since this date (2026-12-01)."
    ),
)
@click.option(
    "--reader",
    default="digest",
    show_default=True,
    metavar="NAME",
    help=(
        "Whose place in the feed to read from and move (--since last): each reader has its own,"
        " so a second digest or a person's own look does not empty the first. The web app has"
        " its own too."
    ),
)
@click.option(
    "-k", "k", type=int, default=20, show_default=True, help="How many new papers, best first."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "html"]),
    default="table",
    show_default=True,
    help="html: a self-contained digest to read or send by e-mail.",
)
@out_option
@index_option
@click.option("--wide", is_flag=True, help="Do not fit the table to the terminal's width.")
@quiet_option
@library_errors
def feed(tags, since, reader, k, fmt, out, index, wide, quiet):
    """The papers added since the tag's feed was last read, ranked as `like --tag` ranks them,
    without the tag's papers and those marked seen or not interested for it, each with the seeds
    it is there because of. A feed since the last read counts as read once it is written, for
    its reader only (--reader): a second feed the same day lists only what was added since. A
    look with --since DATE moves no reader's place.

    Examples:

    \b
        papers feed --tag mine
        papers feed --tag mine --format html --out today.html
        papers feed --tag mine --since 2026-11-01 -k 50
        papers feed --tag mine --reader me
    """
    from ..errors import InputError
    from ..reading.feed import feed as make_feed
    from ..reading.feed import mark_read, parse_since
    from ..reading.tags import TagStore, check_tag
    from ..render.feed import feed_heading, render_feed

    try:
        parse_since(since)
    except InputError as error:
        raise click.BadParameter(str(error), param_hint="--since") from None
    try:
        check_tag(reader)
    except InputError as error:
        raise click.BadParameter(str(error).replace("tag", "reader", 1), "--reader") from None
    with opened_index(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        made = make_feed(recommender, store, tags, since=since, k=k, reader=reader)
        heading = feed_heading(made.tags, made.after)
        text = render_feed(made.results, fmt, heading, table_width(wide))
        with output_file(out) as partial:
            (sys.stdout if partial is None else partial).write(text)
        mark_read(store, made)
    if made.unseeded:
        # Said even with -q: the feed stays empty until the tag holds papers.
        first = made.tags[0]
        click.echo(
            f"{first} holds no papers yet, so nothing ranks for it: tag some with"
            f" `papers tags add {first} PAPER...`",
            err=True,
        )
    if not quiet:
        shown = plural(made.new, "new paper")
        if len(made.results) < made.new:
            shown += f", the best {len(made.results)} shown (-k for more)"
        click.echo(f"{shown}{' in ' + out if out not in (None, '-') else ''}", err=True)


@click.group(invoke_without_command=True)
@index_option
@format_option
@click.pass_context
@library_errors
def tags(context, index, fmt):
    """Your tags of papers, kept beside the index (the ones `papers serve` shows): list them.

    Examples:

    \b
        papers tags
        papers tags add to-read FlashDP VADB
        papers tags not to-read TFLA
        papers like --tag to-read --exclude-seen to-read
    """
    if context.invoked_subcommand is not None:
        return
    import json

    from ..reading.tags import TagStore, items_note
    from ..render.tables import render

    with opened_index(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        rows = [
            {
                "tag": name,
                "papers": ids,
                "not": store.marked(name, "not"),
                "seen": store.marked(name, "seen"),
                # a collection some of whose items did not become papers: why
                **({"left_out": store.left_out(name)} if store.left_out(name) else {}),
            }
            for name, ids in store.tags().items()
        ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    elif not rows:
        click.echo("no tags yet: add some with `papers tags add TAG PAPER...`")
    else:
        shown = [
            {
                "tag": row["tag"],
                "papers": len(row["papers"]),
                "not interested": len(row["not"]),
                "seen": len(row["seen"]),
                "first papers": ", ".join(row["papers"][:3]),
                "items": items_note(len(row["papers"]), row.get("left_out", {})),
            }
            for row in rows
        ]
        columns = {"tag": 0, "papers": 0, "not interested": 0, "seen": 0, "first papers": 60}
        if any(row["items"] for row in shown):  # a collection whose items did not all become papers
            columns["items"] = 0
        click.echo(
            render(shown, list(columns), fmt, columns),
            nl=False,
        )


def _tag_command(name: str, summary: str, action):
    @tags.command(name=name, help=summary)
    @click.argument("tag")
    @click.argument("papers", nargs=-1, required=True)
    @index_option
    @library_errors
    def command(tag, papers, index):
        from ..reading.tags import TagStore

        with opened_index(index) as recommender:
            store = TagStore(recommender.stored.index_dir)
            for reference in papers:
                held = action(recommender, store, tag, reference)
        from ..reading.tags import MARKS

        marked = "" if name in ("add", "remove") else f" marked {MARKS[name]}"
        click.echo(f"{tag}: {plural(len(held), 'paper')}{marked}", err=True)

    return command


for _name, _summary in (
    ("add", "Tag papers (ID, handle or unique prefix)."),
    ("remove", "Untag papers."),
    ("not", "Mark papers not interested for a tag: its recommendations are unlike them."),
    ("seen", "Mark papers seen for a tag: `like --tag T --exclude-seen T` leaves them out."),
):
    _tag_command(
        _name, _summary, (lambda name: lambda r, s, t, p: _tag_action(name)(r, s, t, p))(_name)
    )


@tags.command(name="unmark")
@click.argument("tag")
@click.argument("papers", nargs=-1, required=True)
@click.option(
    "--mark",
    "kind",
    type=click.Choice(["not", "seen"]),
    required=True,
    help="Which mark to take back.",
)
@index_option
@library_errors
def unmark(tag, papers, kind, index):
    """Take back papers' not-interested or seen mark for a tag."""
    from ..reading.tags import MARKS, TagStore, unmark_paper

    with opened_index(index) as recommender:
        store = TagStore(recommender.stored.index_dir)
        for reference in papers:
            held = unmark_paper(recommender, store, tag, reference, kind)
    click.echo(f"{tag}: {plural(len(held), 'paper')} marked {MARKS[kind]}", err=True)


def _tag_action(name: str):
    from ..reading import tags as tagging

    if name == "add":
        return tagging.tag_paper
    if name == "remove":
        return tagging.untag_paper
    return lambda recommender, store, tag, reference: tagging.mark_paper(
        recommender, store, tag, reference, name
    )
