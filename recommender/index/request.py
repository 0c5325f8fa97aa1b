"""What a build is asked for: one frozen value (:class:`BuildRequest`), made and checked once where
a request comes in (`papers build`, `recommender.build_index`), then carried whole through the
build's stages (index/build.py). "A rebuild keeps the index's own unless given" is one rule over
that value: :func:`kept_from_index`."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..corpus.papers import Paper
from ..embed.choice import EncoderChoice, EncoderRequest, check_request, choose_encoder

if TYPE_CHECKING:
    from .lexical import FixedTerms

# The settings of a build that choose its encoder (embed.choice.EncoderRequest's fields).
ENCODER_SETTINGS = tuple(setting.name for setting in fields(EncoderRequest))


@dataclass(frozen=True)
class BuildRequest:
    """The settings of one build. None keeps the index's own (else takes the default).

    `inputs`: files and folders of papers (corpus.papers.scan_papers); `index`: its name or
    folder (index.home). `encoder`: the model, precision, device, engine, upgrade and chunking
    (embed.choice.EncoderRequest). `index_type`: "auto", "flat", "hnsw" or "ivf" (index.ann).
    `map_layout`: store the whole index's map layout (index/map_layout.py) for `papers map --all`
    and the server's /map. `where` keeps only the papers matching every condition
    (corpus.where); withdrawn and desk-rejected OpenReview submissions are left out unless
    `keep_withdrawn`. `wait` for another build holding the index. `built_by`: the command the
    index is built for, in its manifest ("evaluate" rebuilds only its own).
    `export_query_encoder`: keep the model's export (ONNX, static table) with the index for its
    queries. `chunk_size`: papers handled at a time (spool.STREAM_PAPERS by default; the index
    files are the same, byte for byte, whatever it is).

    A compaction or a segment builds from papers of its own: `own_papers` gives them instead of
    `inputs` (called once the index is locked), `lexical_terms` (lexical.FixedTerms) weighs the
    TF-IDF rows in another index's vocabulary, `aliases` ({other ID: kept ID}) are kept with those
    of the papers read twice.
    """

    inputs: tuple = ()
    index: str | Path | None = None
    encoder: EncoderRequest = field(default_factory=EncoderRequest)
    index_type: str = "auto"
    map_layout: bool | None = None
    where: tuple[str, ...] = ()
    keep_withdrawn: bool = False
    wait: bool = False
    built_by: str = "build"
    export_query_encoder: bool = True
    chunk_size: int | None = None
    own_papers: Callable[[], Generator[Paper, None, None]] | None = None
    lexical_terms: FixedTerms | None = None
    aliases: Mapping[str, str] | None = None

    @classmethod
    def of(cls, inputs=(), index: str | Path | None = None, **settings) -> BuildRequest:
        """The request of `build_index`'s keyword arguments (the encoder's among them: model,
        precision, device, engine, upgrade, chunking); an unknown one is a TypeError."""
        encoder = {name: settings.pop(name) for name in ENCODER_SETTINGS if name in settings}
        where = tuple(settings.pop("where", ()))
        return cls(tuple(inputs), index, EncoderRequest(**encoder), where=where, **settings)


@dataclass(frozen=True)
class BuildHooks:
    """Who a build tells how it goes: `on_phase(name, total)` as each phase starts, `progress(done,
    total)` as papers are encoded, `notice(line)` of what the user should know (a resumed
    encoding, a setting kept)."""

    progress: Callable[[int, int], None] | None = None
    on_phase: Callable[[str, int | None], None] | None = None
    notice: Callable[[str], None] | None = None

    def phase(self, name: str, total: int | None = None) -> None:
        if self.on_phase is not None:
            self.on_phase(name, total)

    def tell(self, line: str) -> None:
        if self.notice is not None:
            self.notice(line)


def check_build_request(request: BuildRequest) -> Path:
    """What can be refused before any paper is read, or the model hashed: one line saying what to
    change. Returns the index's folder."""
    from ..errors import InputError, OptionError
    from .home import resolve_index_dir
    from .layout import check_index_folder
    from .stored import open_stored

    check_request(request.encoder)
    size = request.chunk_size
    if size is not None and (not isinstance(size, int) or size < 1):
        raise InputError(f"chunk size must be a positive whole number, got {size!r}")
    if request.encoder.engine == "ray":
        from ..embed.ray_engine import require_ray

        require_ray()
    index_dir = resolve_index_dir(request.index)
    check_index_folder(index_dir)  # a folder of the user's is refused at once
    if request.encoder.upgrade:
        if request.where and not request.inputs:
            raise OptionError(
                "an upgrade that keeps only some papers needs inputs: the index's "
                "own papers are upgraded as they are",
                "where",
            )
        from ..embed.choice import check_upgradable

        with open_stored(index_dir, verify=False) as stored:
            check_upgradable(stored.manifest, index_dir)
    return index_dir


def kept_from_index(
    request: BuildRequest,
    record: Mapping | None,
    notice: Callable[[str], None] | None = None,
    index: object = "",
    papers: int | None = None,
) -> tuple[BuildRequest, EncoderChoice]:
    """The request with every setting it leaves unset filled from the manifest `record` of the
    index being rebuilt (None: a new index, the defaults): its model, precision and chunking (as
    embed.choice.choose_encoder decides them for a corpus of `papers` papers, with a notice where a
    new index would get other ones) and whether it stores a map layout. Returns it with the encoder
    the build uses."""
    from .map_layout import MANIFEST_KEY as LAYOUT_KEY

    map_layout = request.map_layout
    if map_layout is None:  # kept across rebuilds, compactions included
        map_layout = record is not None and bool(record.get(LAYOUT_KEY))
    encoding = choose_encoder(request.encoder, record, notice, index, papers)
    encoder = replace(
        request.encoder,
        model=encoding.model,
        precision=encoding.precision,
        chunking=encoding.chunking,
    )
    return replace(request, encoder=encoder, map_layout=map_layout), encoding
