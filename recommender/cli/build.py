"""`papers build`, `add` and `remove`: make an index and change its papers."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import DISTRIBUTION
from .common import (
    index_option,
    notice_to,
    precision_option,
    progress_reporter,
    quiet_option,
    verbose_option,
)
from .errors import library_errors, stopped_builds

if TYPE_CHECKING:
    from ..embed.models import TierAdvice
    from ..index.request import BuildRequest

DEFAULT_INPUT = "seeds"


# The options of `build` that are settings of the build: given to it as one BuildRequest.
REQUEST_OPTIONS = (
    "model",
    "precision",
    "upgrade",
    "index_type",
    "wait",
    "where",
    "keep_withdrawn",
    "engine",
    "device",
    "map_layout",
)


def settings_as_request(command: Callable) -> Callable:
    """`command` given its options that are settings of the build as one BuildRequest (made here,
    once, and checked by build_index before any paper is read)."""

    @functools.wraps(command)
    def given(inputs, index, chunking, **options):
        from ..embed.windows import Chunking
        from ..index.request import BuildRequest

        settings = {name: options.pop(name) for name in REQUEST_OPTIONS}
        strategy = Chunking(strategy=chunking) if chunking else None
        request = BuildRequest.of(list(inputs), index, chunking=strategy, **settings)
        return command(request, **options)

    return given


@click.command()
@click.argument("inputs", nargs=-1, type=click.Path())
@index_option
@click.option(
    "--model",
    default=None,
    help=(
        "sentence-transformers model name or folder (default: all-MiniLM-L6-v2, packaged); "
        "'static': the fast tier, static embeddings distilled from it (~8x faster to build, "
        "ranking about as well as TF-IDF alone: docs/tiers.md); 'all-mpnet-base-v2': the quality "
        "tier (its parts installed first; ~4x the encoding time at int8, its default; 42.6 against "
        "40.6 MAP on held-out CSFCube queries: docs/models.md). `papers models` lists them with "
        "their speed. A rebuild keeps the index's own unless given."
    ),
)
@precision_option(
    "auto (the default): the model's own for this machine and corpus size (a rebuild keeps the"
    " index's own); full: fp32 weights; fast: the model's fastest int8 that ranks as fp32 does"
    " (docs/tiers.md). $PAPERS_PRECISION where not given."
)
@click.option(
    "--upgrade",
    is_flag=True,
    help=(
        "Rebuild an index made with --model static with the full model, from its own papers "
        "(or INPUTS); it answers queries from its fast version until the new one is ready."
    ),
)
@click.option(
    "--chunking",
    type=click.Choice(["sentences", "windows", "truncate"]),
    default=None,
    help=(
        "Long abstracts: mean of windows that each start with the title and end at a sentence end "
        "(the default for a new index), of plain token windows, or cut at the model's limit. "
        "A rebuild keeps the index's own unless given."
    ),
)
@click.option(
    "--index-type",
    type=click.Choice(["auto", "flat", "hnsw", "ivf"]),
    default="auto",
    show_default=True,
    help="FAISS index: exact for small corpora, approximate above a threshold.",
)
@click.option(
    "--wait", is_flag=True, help="If another build holds the index, wait for it instead of failing."
)
@click.option(
    "--compact",
    is_flag=True,
    help=(
        "Rebuild the index from its own live papers: those of `papers add` merged in, those of "
        "`papers remove` left out (their vectors come from the cache)."
    ),
)
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="FIELD=VALUE",
    help=(
        "Keep only matching papers: category=cs.LG,cs.CL, year>=2020, venue=*ICML* (repeatable; all"
        " must hold)."
    ),
)
@click.option(
    "--keep-withdrawn",
    is_flag=True,
    help="Index withdrawn and desk-rejected OpenReview submissions too (left out by default).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help=(
        "Encode here, or on a Ray cluster ($RAY_ADDRESS, else a local one); needs"
        f" {DISTRIBUTION}[ray]."
    ),
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Encode on the CPU or a CUDA GPU; auto: a GPU where torch (or the Ray cluster) has one.",
)
@click.option(
    "--map-layout/--no-map-layout",
    default=None,
    help=(
        "Store the map's layout of every paper, read by `papers map --all` and `papers serve`'s"
        " /map instead of projecting on request (t-SNE: seconds for thousands of papers,"
        " docs/performance.md). A rebuild keeps the index's own unless given."
    ),
)
@quiet_option
@verbose_option
@library_errors
@settings_as_request
def build(request: BuildRequest, compact, quiet, verbose):
    """Build an index from files or folders of papers (default: seeds/ in a checkout).

    Reads .bib (BibTeX), .json/.jsonl (our records, the arXiv metadata snapshot,
    OpenAlex works, Semantic Scholar papers, CSL-JSON from Zotero, OpenReview notes),
    .csv, .txt, and a Zotero library in place (`zotero:` or PATH/zotero.sqlite).

    A build that is stopped (Ctrl-C, a kill, a crash) keeps the papers it encoded:
    run the same command again to resume.

    Examples:

    \b
        papers build
        papers build my-papers.bib --index mine
        papers build zotero: --index library
        papers build arxiv-metadata-oai-snapshot.json --where category=cs.LG --index arxiv-lg
        papers build corpus/ --chunking truncate
        papers build arxiv-metadata-oai-snapshot.json --model static --index arxiv
        papers build --upgrade --index arxiv
        papers build --compact --index arxiv
        RAY_ADDRESS=10.0.0.5:6379 papers build corpus/ --engine ray
    """
    from ..errors import InputError
    from ..index.build import build_index

    encoder = request.encoder
    if compact:
        given = (request.inputs, encoder.upgrade, request.where, encoder.model, encoder.precision)
        if any(given) or encoder.chunking or request.map_layout is not None:
            raise InputError(
                "--compact rebuilds the index from its own papers with its own settings: "
                "give no INPUTS, --upgrade, --where, --model, --precision, --chunking or"
                " --map-layout with it"
            )
        _compact(request, quiet)
        return
    if not request.inputs and not encoder.upgrade:
        if not Path(DEFAULT_INPUT).is_dir():
            raise InputError(
                "no input given: name a file or folder of papers, e.g. `papers build my-papers.bib`"
            )
        request = dataclasses.replace(request, inputs=(DEFAULT_INPUT,))

    with stopped_builds(), progress_reporter(quiet) as reporter:
        report = build_index(
            request=request,
            progress=reporter.update,
            on_phase=reporter.phase,
            notice=notice_to(reporter),
        )
    from ..render.indexes import render_build_changes, render_build_summary

    if not quiet:
        click.echo(render_build_changes(report), err=True, nl=False)
    click.echo(render_build_summary(report), nl=False)
    if report.advice is not None and not quiet:
        click.echo(tier_advice_line(report.advice), err=True)


def _compact(request: BuildRequest, quiet: bool) -> None:
    """`papers build --compact`: the index rebuilt from its own live papers."""
    from ..index.segments import compact as compact_index

    with stopped_builds(), progress_reporter(quiet) as reporter:
        report = compact_index(
            request.index,
            wait=request.wait,
            progress=reporter.update,
            notice=notice_to(reporter),
            on_phase=reporter.phase,
        )
    click.echo(
        f"compacted {report.papers} papers into {report.index_dir}: encoded {report.encoded},"
        f" reused {report.reused} from the cache ({report.index_kind} search)"
    )


def tier_advice_line(advice: TierAdvice) -> str:
    """A first build's pointer to a tier that may serve its corpus better (embed.models.TierAdvice),
    in the command's own option names."""
    minutes = advice.minutes
    cost = f"about {round(minutes)} min" if minutes >= 1.5 else "about a minute"
    if minutes >= 90:
        cost = f"about {minutes / 60:.1f} h"
    install = "" if advice.installed else "; `papers models` says how to install it"
    measured = (
        f"measured building {advice.measured_papers:,} papers"
        if advice.measured_papers is not None
        else "measured on the encoder alone"
    )
    return (
        f"a corpus this size may be better served by the {advice.tier} tier: rebuild with "
        f"--model {advice.model} ({advice.held_out[0]:.1f} against {advice.instead_of[0]:.1f} MAP,"
        f" {advice.held_out[1]:.1f} against {advice.instead_of[1]:.1f} NDCG%20 on held-out CSFCube"
        f" queries; {cost} of encoding on 2 idle CPU cores, at the {advice.papers_per_minute:,.0f}"
        f" papers a minute {measured}, longer on a busy machine{install})"
    )


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@index_option
@click.option(
    "--no-compact",
    is_flag=True,
    help="Never compact in this add, however large the segments have grown.",
)
@click.option(
    "--sync",
    is_flag=True,
    help="The index's papers from these files are exactly theirs: papers an earlier build or add "
    "read from them that they no longer hold are removed.",
)
@quiet_option
@library_errors
def add(inputs, index, no_compact, sync, quiet):
    """Add papers to an index without rebuilding it: only the new ones are encoded.

    Papers the index holds are skipped, so adding a file twice adds nothing twice; a paper that is
    the same as one it holds (the same text, arXiv ID or DOI) is skipped too, its ID kept as
    another name of that paper, as a build does. With --sync, the index's papers from these files
    become exactly theirs: those gone are removed, those whose text changed replaced.
    They are written as a segment beside the index; once the segments hold more than a tenth
    of its papers, the add starts `papers build --compact` in the background and returns.
    `-` reads the papers (JSON lines) from standard input. An index that does not exist yet is
    built from them, as `papers build` would; an empty file adds nothing.

    Examples:

    \b
        papers add today.jsonl --index arxiv
        papers add new.bib
        papers add library.bib --sync
    """
    from ..errors import OptionError
    from ..index.segments import COMPACT_SHARE, add_papers

    if sync and "-" in inputs:
        raise OptionError("--sync compares the papers of named files: standard input has no name")

    with (
        contextlib.ExitStack() as stack,
        stopped_builds("add"),
        progress_reporter(quiet) as reporter,
    ):
        paths = [_stdin_file(stack) if path == "-" else path for path in inputs]
        report = add_papers(
            paths,
            index=index,
            progress=reporter.update,
            notice=notice_to(reporter),
            compact_share=None if no_compact else COMPACT_SHARE,
            background=True,
            sync=sync,
        )
    compacted = " and compacted the index" if report.compacted else ""
    if report.compacting is not None:
        compacted = f"; compacting the index in the background (process {report.compacting})"
    elif report.compaction_running:
        compacted = "; a compaction of the index is running already"
    if sync:
        source = "them" if len(inputs) > 1 else "it"
        compacted = (
            f"; replaced {report.replaced} changed, removed {report.removed} gone from {source}"
            f"{compacted}"
        )
    from ..index.home import display_name
    from ..render.tables import plural

    if report.created:
        click.echo(
            f"added {plural(report.added, 'paper')} to {display_name(report.index_dir)}, a new"
            f" index (encoded {report.encoded})"
        )
        return
    click.echo(
        f"added {plural(report.added, 'paper')} to {display_name(report.index_dir)} "
        f"(encoded {report.encoded}; {report.skipped} already in the index){compacted}"
    )


def _stdin_file(stack) -> str:
    """Standard input copied to a private temporary .jsonl file, for the readers that take paths."""
    import shutil
    import tempfile

    from ..files import open_exclusive

    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="papers-add-"))
    path = os.path.join(folder, "stdin.jsonl")
    with open_exclusive(path, "wb") as handle:
        shutil.copyfileobj(sys.stdin.buffer, handle)
    return path


@click.command()
@click.argument("ids", nargs=-1, required=True)
@index_option
@library_errors
def remove(ids, index):
    """Remove papers from an index by ID, or another ID of theirs (they are left out of every
    result until `papers build --compact` drops them for good).

    Examples:

    \b
        papers remove 2401.01234 --index arxiv
    """
    from ..index.home import display_name, resolve_index_dir
    from ..index.segments import remove_papers

    removed = remove_papers(ids, index=index)
    click.echo(f"removed {removed} papers from {display_name(resolve_index_dir(index))}")
