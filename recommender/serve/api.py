"""The HTTP API: each endpoint parses, calls one library function, returns the JSON the CLI
prints."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParameter
from fastapi.responses import JSONResponse, Response

from ..errors import InputError
from ..reading.related import related_work, select_rows
from ..reading.tags import (
    MAX_TAG,
    check_tag,
    mark_paper,
    recommend_for_tags,
    unmark_paper,
)
from ..render.related import related_record
from ..render.tables import paper_list_records, paper_record, result_records
from .jobs import JOBS, BackgroundDied, Busy, compute_sessions_json
from .security import TOKEN_COOKIE, Refused, cookie_name, same_origin

MAX_K = 100
MAX_QUERY = 1000  # characters of a search text
# characters of a paper ID: any ID a build accepts fits in a request head (protocol.HEAD_BYTES),
# even
# with every character percent-encoded
MAX_ID = 16_000
PREPARE_SECONDS = 60.0  # how long /api/sessions waits for a plan being made before it says "retry"
MAX_PAGE = 200  # papers a page of /api/papers
MAX_SEEDS = 50  # papers a request names (like, related-work)
Mode = Literal["hybrid", "dense", "lexical"]

router = APIRouter(prefix="/api")


def lease(request: Request):
    return request.app.state.live.lease()


def cookie(request: Request, base: str) -> str | None:
    """This server's cookie `base` (named per port: see security.cookie_name)."""
    server = request.scope.get("server")
    return request.cookies.get(cookie_name(base, server[1] if server else None))


def with_encoder(opened) -> None:
    """Load the query encoder once a version, before the first search: concurrent first searches
    would each load a model."""
    opened.cached("query encoder", lambda: opened.recommender.encode_query("warm up"))


def check_count(name: str, values: list[str], most: int = MAX_SEEDS) -> list[str]:
    if len(values) > most:
        raise InputError(f"parameter {name}: at most {most} papers a request, got {len(values)}")
    return values


def check_write(request: Request) -> None:
    """Writes need the token when the server has one, and never come from another site."""
    if not same_origin(request.headers.get("origin"), request.headers.get("host")):
        raise Refused(
            403,
            "cross-site write refused: send it from this server's own pages or a client without an"
            " Origin",
        )
    if not request.app.state.access.may_write(
        request.headers.get("authorization"), cookie(request, TOKEN_COOKIE)
    ):
        raise Refused(
            401,
            "writing needs the token `papers serve` printed: send the header Authorization: Bearer"
            " TOKEN",
        )


def write_tag(request: Request, tag: str, reference: str, remove: bool = False) -> list[str]:
    """Tag (or untag) the paper a reference names, as reading.tags.tag_paper and untag_paper do, but
    with the index leased only to resolve the reference: a write that waits for a tags.sqlite
    another program has locked holds nothing that lookups need."""
    from ..errors import PaperNotFoundError

    check_tag(tag)
    with lease(request) as opened:
        try:
            paper_id = opened.recommender.id_of(opened.recommender.resolve(reference))
        except PaperNotFoundError:
            if not remove:
                raise
            paper_id = reference  # a tagged ID of a paper a rebuild dropped is removed as given
    store = request.app.state.tags
    return store.remove(tag, paper_id) if remove else store.add(tag, paper_id)


def k_parameter(default: int):
    return Query(default, ge=1, le=MAX_K, description=f"How many papers to return (1..{MAX_K}).")


@router.get("/like", summary="Papers like the given ones (and unlike those in `not`)")
def like(
    request: Request,
    id: list[str] = Query(..., description="Paper ID, handle or unique ID prefix (repeatable)."),
    not_: list[str] = Query(
        [], alias="not", description="A paper the results should be unlike (repeatable)."
    ),
    k: int = k_parameter(10),
    mode: Mode = "hybrid",
    min_score: float | None = Query(
        None, ge=-1, le=1, description="Drop papers scoring below this."
    ),
    diverse: float | None = Query(
        None, ge=0, le=1, description="Maximal marginal relevance (1 = relevance only)."
    ),
    why: bool = Query(
        False,
        description="The reasons that tie each paper to the query: shared terms (why), phrases"
        " and the closest pair of sentences.",
    ),
    exclude: list[str] = Query([], description="Paper IDs to leave out (repeatable)."),
):
    check_count("id", id)
    check_count("not", not_)
    check_count("exclude", exclude, 10_000)
    with lease(request) as opened:
        results = opened.recommender.like(
            *id,
            k=k,
            not_=not_,
            exclude=exclude,
            min_score=min_score,
            diverse=diverse,
            why=why,
            mode=mode,
        )
        return JSONResponse(result_records(results))


@router.get("/search", summary="Papers about a free text")
def search(
    request: Request,
    q: str = Query(..., min_length=1, max_length=MAX_QUERY, description="The text to search for."),
    k: int = k_parameter(10),
    mode: Mode = "hybrid",
    min_score: float | None = Query(None, ge=-1, le=1),
    diverse: float | None = Query(None, ge=0, le=1),
    why: bool = False,
    exclude: list[str] = Query([]),
):
    with lease(request) as opened:
        with_encoder(opened)
        results = opened.recommender.search(
            q, k=k, exclude=exclude, min_score=min_score, diverse=diverse, why=why, mode=mode
        )
        return JSONResponse(result_records(results))


@router.get("/papers/{paper_id:path}", summary="One paper in full (as `papers show --format json`)")
def paper(request: Request, paper_id: str = PathParameter(..., max_length=MAX_ID)):
    with lease(request) as opened:
        return JSONResponse(paper_record(opened.recommender.show(paper_id)))


@router.get(
    "/papers", summary="Papers in index order, a page at a time (as `papers list --format json`)"
)
def papers(
    request: Request,
    limit: int = Query(50, ge=1, le=MAX_PAGE),
    offset: int = Query(0, ge=0),
    where: list[str] = Query(
        [], description="year>=2020, venue=*ICML* (repeatable; all must hold)."
    ),
):
    with lease(request) as opened:
        page, following = opened.recommender.papers_page(offset, limit, where)
        response = JSONResponse(paper_list_records(page))
    if following is not None:  # the next page, as GitHub's API links it
        response.headers["Link"] = (
            f'<{request.url.include_query_params(offset=following)}>; rel="next"'
        )
    return response


@router.get(
    "/related-work",
    summary="For each paper, the papers most related to it (as `related-work --format json`)",
)
def related(
    request: Request,
    id: list[str] = Query(..., description="Paper ID or handle (repeatable)."),
    k: int = k_parameter(5),
    why: bool = False,
):
    check_count("id", id)
    with lease(request) as opened:
        lists = related_work(opened.recommender, select_rows(opened.recommender, id), k=k, why=why)
        return JSONResponse([related_record(item, why) for item in lists])


@router.get("/inspect", summary="Why a paper is listed: shared terms and the two cosines")
def inspect(
    request: Request,
    id: str = Query(..., max_length=MAX_ID, description="The paper to explain."),
    pid: str | None = Query(
        None, max_length=MAX_ID, description="The seed paper it was listed for."
    ),
    q: str | None = Query(
        None, min_length=1, max_length=MAX_QUERY, description="The search text it was found for."
    ),
):
    with lease(request) as opened:
        if q is not None:
            with_encoder(opened)
        return JSONResponse(opened.recommender.explain(id, seed=pid, text=q).to_dict())


def prepared(request: Request, kind: str, function, *args):
    """The future result of long work on the live version of the index (see jobs: off the request
    path)."""
    from ..index.stored import live_version

    index_dir = request.app.state.live.index_dir
    try:
        return JOBS.result((live_version(index_dir), kind, *args), function, str(index_dir), *args)
    except Busy as error:
        raise Refused(503, f"the server is busy ({error}): try again in a minute") from None


async def wait_for(future, seconds: float):
    """The result of `future` if it is done within `seconds`, else None (the work goes on)."""
    import asyncio

    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), seconds)
    except asyncio.TimeoutError:
        return None
    except BackgroundDied as error:
        raise Refused(503, str(error)) from None


@router.get(
    "/sessions",
    summary="The papers split into reading-group sessions (as `papers sessions --format json`)",
)
async def sessions(request: Request, n: int = Query(6, ge=1, le=50)):
    plan = await wait_for(
        prepared(request, "sessions.json", compute_sessions_json, n), PREPARE_SECONDS
    )
    if plan is None:
        return JSONResponse(
            {"error": f"the plan in {n} sessions is still being made: ask again in a minute"},
            503,
            headers={"Retry-After": "30"},
        )
    return Response(plan, media_type="application/json")


@router.get(
    "/info", summary="What the index holds and how it was built (as `papers info --format json`)"
)
def info(request: Request):
    with lease(request) as opened:
        return JSONResponse(opened.recommender.info())


TAG_RULE = f"1 to {MAX_TAG} printable characters; '/' separates a collection's folders."
tag_parameter = PathParameter(..., max_length=MAX_TAG, description=TAG_RULE)
tag_query = Query(..., max_length=MAX_TAG, description=TAG_RULE)
paper_query = Query(..., max_length=MAX_ID, description="The paper's ID, handle or ID prefix.")


def check_tag_segment(request: Request, tag: str, position: int = 3) -> None:
    """Refuse a tag with an encoded '/' in a path of /api/tags/{tag}/{paper} (the segment at
    `position`): the path cannot say where the tag ends and the paper begins (the query can)."""
    raw = request.scope.get("raw_path") or b""
    parts = raw.split(b"?")[0].split(b"/")
    segment = parts[position] if len(parts) > position else b""
    if b"%2f" in segment.lower():
        raise InputError(f"tag '{tag}' holds '/': give it in the query, as ?tag=...&paper=...")


@router.get("/tags", summary="Every tag with its paper IDs (the index's collections among them)")
def tags(request: Request):
    store = request.app.state.tags
    return JSONResponse(
        [
            {
                "tag": name,
                "papers": ids,
                # a collection some of whose items did not become papers: why
                **({"left_out": store.left_out(name)} if store.left_out(name) else {}),
            }
            for name, ids in store.tags().items()
        ]
    )


@router.put(
    "/tags",
    summary=(
        "Tag a paper, the tag in the query: any tag, one with '/' too "
        "(needs the token off loopback)"
    ),
)
def put_tag_query(request: Request, tag: str = tag_query, paper: str = paper_query):
    check_write(request)
    return JSONResponse({"tag": tag, "papers": write_tag(request, tag, paper)})


@router.delete(
    "/tags", summary="Untag a paper, the tag in the query (needs the token off loopback)"
)
def delete_tag_query(request: Request, tag: str = tag_query, paper: str = paper_query):
    check_write(request)
    return JSONResponse({"tag": tag, "papers": write_tag(request, tag, paper, remove=True)})


@router.put("/tags/{tag}/{paper_id:path}", summary="Tag a paper (needs the token off loopback)")
def put_tag(
    request: Request,
    tag: str = tag_parameter,
    paper_id: str = PathParameter(..., max_length=MAX_ID),
):
    check_write(request)
    check_tag_segment(request, tag)
    return JSONResponse({"tag": tag, "papers": write_tag(request, tag, paper_id)})


@router.delete(
    "/tags/{tag}/{paper_id:path}", summary="Untag a paper (needs the token off loopback)"
)
def delete_tag(
    request: Request,
    tag: str = tag_parameter,
    paper_id: str = PathParameter(..., max_length=MAX_ID),
):
    check_write(request)
    check_tag_segment(request, tag)
    return JSONResponse({"tag": tag, "papers": write_tag(request, tag, paper_id, remove=True)})


@router.get(
    "/tags/{tag:path}/recommendations",
    summary="Papers like the tag's papers, the tagged ones left out",
)
def tag_recommendations(
    request: Request,
    tag: str = tag_parameter,
    k: int = k_parameter(10),
    mode: Mode = "hybrid",
    why: bool = False,
    exclude_seen: list[str] = Query([], max_length=MAX_TAG),
):
    with lease(request) as opened:
        return JSONResponse(
            result_records(
                recommend_for_tags(
                    opened.recommender,
                    request.app.state.tags,
                    [tag],
                    k=k,
                    mode=mode,
                    why=why,
                    exclude_seen=check_count("exclude_seen", exclude_seen),
                )
            )
        )


@router.get(
    "/feed",
    summary="The papers added since the tag's feed was last read (as `papers feed --format json`)",
)
def feed(
    request: Request,
    tag: list[str] = Query(..., description="Tag whose profile ranks the feed (repeatable)."),
    since: str = Query("last", max_length=40, description="last, or a date: 2026-12-01."),
    k: int = k_parameter(20),
):
    from ..reading.feed import WEB
    from ..reading.feed import feed as make_feed

    check_count("tag", tag, 20)
    # The web app's own place in the feed; reading moves it not: the page's "Mark all read" does.
    with lease(request) as opened:
        made = make_feed(
            opened.recommender, request.app.state.tags, tag, since=since, k=k, reader=WEB
        )
        return JSONResponse(result_records(made.results))


# Marks of a paper for a tag, as `papers tags not|seen`: not interested (a negative seed), seen
# (left out).
Mark = Literal["not", "seen"]


@router.get(
    "/marks/{kind}/{tag:path}", summary="The papers marked not interested or seen for a tag"
)
def marks(request: Request, kind: Mark, tag: str = tag_parameter):
    return JSONResponse(
        {"tag": tag, "kind": kind, "papers": request.app.state.tags.marked(tag, kind)}
    )


@router.put(
    "/marks/{kind}",
    summary="Mark a paper for a tag given in the query (needs the token off loopback)",
)
def put_mark_query(request: Request, kind: Mark, tag: str = tag_query, paper: str = paper_query):
    check_write(request)
    with lease(request) as opened:
        papers = mark_paper(opened.recommender, request.app.state.tags, tag, paper, kind)
        return JSONResponse({"tag": tag, "kind": kind, "papers": papers})


@router.delete(
    "/marks/{kind}", summary="Take a mark back, the tag in the query (needs the token off loopback)"
)
def delete_mark_query(request: Request, kind: Mark, tag: str = tag_query, paper: str = paper_query):
    check_write(request)
    with lease(request) as opened:
        papers = unmark_paper(opened.recommender, request.app.state.tags, tag, paper, kind)
        return JSONResponse({"tag": tag, "kind": kind, "papers": papers})


@router.put(
    "/marks/{kind}/{tag}/{paper_id:path}",
    summary="Mark a paper for a tag (needs the token off loopback)",
)
def put_mark(
    request: Request,
    kind: Mark,
    tag: str = tag_parameter,
    paper_id: str = PathParameter(..., max_length=MAX_QUERY),
):
    check_write(request)
    check_tag_segment(request, tag, position=4)
    with lease(request) as opened:
        papers = mark_paper(opened.recommender, request.app.state.tags, tag, paper_id, kind)
        return JSONResponse({"tag": tag, "kind": kind, "papers": papers})


@router.delete(
    "/marks/{kind}/{tag}/{paper_id:path}", summary="Take a mark back (needs the token off loopback)"
)
def delete_mark(
    request: Request,
    kind: Mark,
    tag: str = tag_parameter,
    paper_id: str = PathParameter(..., max_length=MAX_QUERY),
):
    check_write(request)
    check_tag_segment(request, tag, position=4)
    with lease(request) as opened:
        papers = unmark_paper(opened.recommender, request.app.state.tags, tag, paper_id, kind)
        return JSONResponse({"tag": tag, "kind": kind, "papers": papers})
