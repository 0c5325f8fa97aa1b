"""The pages, after arxiv-sanity-lite: one list page driven by its address (`?q=`, `?pid=`,
`?tags=`), paper cards with "similar" and "inspect", a page per paper, tags, the map and the
sessions."""

from __future__ import annotations

import functools
import logging
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi import Path as PathParameter
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..corpus.summary import summary
from ..errors import install_command
from ..reading.layout import stores_whole_index_layout
from ..reading.tags import (
    MAX_TAG,
    mark_paper,
    recommend_for_tags,
    unmark_paper,
)
from ..render.feed import reading_date
from .api import (
    MAX_ID,
    MAX_K,
    MAX_QUERY,
    check_write,
    cookie,
    lease,
    prepared,
    wait_for,
    with_encoder,
    write_tag,
)
from .jobs import compute_map, compute_sessions
from .links import address, url_part
from .security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    TOKEN_COOKIE,
    Refused,
    cookie_name,
    csrf_matches,
    local_path,
)

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 25
STORED_MAP_WAIT_SECONDS = 30.0  # the map of an index whose build stored its layout
PAGE_WAIT_SECONDS = 2.0  # a page of long work waits this long, then says it is being prepared
MAX_PAGES = 10_000
router = APIRouter(include_in_schema=False)
log = logging.getLogger("papers.serve")


@functools.lru_cache(maxsize=1)
def templates():
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["web_link"] = web_link
    environment.filters["reading_date"] = reading_date
    # Every character but letters, digits and "-._~" escaped, "/" too: an ID such as "a/../b" stays
    # one
    # path segment that a browser cannot fold into another path.
    environment.filters["url_part"] = url_part
    environment.filters["paper_url"] = lambda paper_id: address("/paper", paper_id, "id")
    environment.filters["tag_url"] = lambda tag: address("/tags/", tag, "name")
    return environment


def web_link(url: str | None) -> str | None:
    """The URL if a browser may follow it from our page (http or https), else None: shown as
    text."""
    if (
        isinstance(url, str)
        and url.lower().startswith(("http://", "https://"))
        and url.isprintable()
    ):
        return url
    return None


def render(request: Request, template: str, context: dict, status: int = 200) -> HTMLResponse:
    """A page, with the form token (CSRF) its forms send back; the token cookie set on first
    visit."""
    csrf = cookie(request, CSRF_COOKIE) or secrets.token_urlsafe(24)
    access = request.app.state.access
    can_write = access.token is None or access.may_write(None, cookie(request, TOKEN_COOKIE))
    page = (
        templates()
        .get_template(template)
        .render(
            **context,
            csrf=csrf,
            csrf_field=CSRF_FIELD,
            can_write=can_write,
            path=request.url.path,
            # The path as sent, still percent-encoded: a tag or ID with '/' (%2F) comes back to this
            # page.
            here=(request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
            + (f"?{request.url.query}" if request.url.query else ""),
            index_name=request.app.state.live.index_dir.name,
        )
    )
    response = HTMLResponse(page, status_code=status)
    if cookie(request, CSRF_COOKIE) != csrf:
        server = request.scope.get("server")
        response.set_cookie(
            cookie_name(CSRF_COOKIE, server[1] if server else None),
            csrf,
            httponly=True,
            samesite="strict",
        )
    return response


def card(
    paper, score: float | None = None, seed: str | None = None, text: str | None = None
) -> dict:
    """What a paper card shows; `seed`/`text`: what "inspect" explains it against."""
    inspect = {"id": paper.id}
    if seed is not None:
        inspect["pid"] = seed
    elif text is not None:
        inspect["q"] = text
    return {
        "paper": paper,
        "score": score,
        "summary": summary(paper),
        "inspect": urlencode(inspect),
    }


def swagger_folder() -> Path | None:
    """Swagger UI 5's files as the fastapi-offline package ships them (served at /swagger: /docs
    works offline)."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).resolve().parent / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


@router.get("/", response_class=HTMLResponse)
def index_page(
    request: Request,
    q: str | None = Query(None, max_length=MAX_QUERY),
    pid: str | None = Query(None, max_length=MAX_ID),
    tags: str | None = Query(
        None, max_length=MAX_QUERY, description="Tag names, comma-separated; * for all."
    ),
    k: int = Query(25, ge=1, le=MAX_K),
    page: int = Query(1, ge=1, le=MAX_PAGES),
):
    q = q.strip() if q else None
    with lease(request) as opened:
        recommender = opened.recommender
        context: dict[str, Any] = {
            "q": q or "",
            "pid": pid,
            "tags": tags,
            "k": k,
            "page": page,
            "next_page": None,
            "seed": None,
        }
        if q:
            with_encoder(opened)
            results = recommender.search(q, k=k)
            context.update(
                heading=f"Papers about “{q}”",
                cards=[card(r.paper, r.score, text=q) for r in results],
            )
        elif pid:
            results = recommender.like(pid, k=k)
            seed = recommender.show(pid)
            context.update(
                heading="Papers like",
                seed=card(seed),
                cards=[card(r.paper, r.score, seed=seed.id) for r in results],
            )
        elif tags:
            known = tag_names(request)
            # A tag whose name has a comma (a collection "Smith, Jones") is one tag, not two.
            names = (
                known
                if tags.strip() == "*"
                else (
                    [tags.strip()]
                    if tags.strip() in known
                    else [name.strip() for name in tags.split(",") if name.strip()]
                )
            )
            results = recommend_for_tags(recommender, request.app.state.tags, names, k=k)
            context["tag_list"] = names
            context.update(
                heading=(
                    "Recommended for all tags"
                    if tags.strip() == "*"
                    else f"Recommended for {', '.join(names)}"
                ),
                cards=[card(r.paper, r.score) for r in results],
            )
        else:
            papers, following = recommender.papers_page((page - 1) * PAGE_SIZE, PAGE_SIZE)
            context.update(
                heading=f"{len(recommender):,} papers",
                cards=[card(paper) for paper in papers],
                next_page=page + 1 if following is not None else None,
            )
        context["tag_names"] = tag_names(request)
        return render(request, "index.html", context)


@router.get("/paper", response_class=HTMLResponse)
def paper_page_by_query(request: Request, id: str = Query(..., max_length=MAX_ID)):
    """A paper's page for an ID no path can carry (".", "..")."""
    return paper_page(request, id)


@router.get("/paper/{paper_id:path}", response_class=HTMLResponse)
def paper_page(request: Request, paper_id: str = PathParameter(..., max_length=MAX_ID)):
    with lease(request) as opened:
        recommender = opened.recommender
        paper = recommender.show(paper_id)
        similar = recommender.like(paper.id, k=10)
        every = all_tags(request)
        tagged = [name for name, ids in every.items() if paper.id in ids]
        return render(
            request,
            "paper.html",
            {
                "item": card(paper),
                "cards": [card(r.paper, r.score, seed=paper.id) for r in similar],
                "tagged": tagged,
                "tag_names": list(every),
            },
        )


@router.get("/inspect", response_class=HTMLResponse)
def inspect_page(
    request: Request,
    id: str = Query(..., max_length=MAX_ID),
    pid: str | None = Query(None, max_length=MAX_ID),
    q: str | None = Query(None, min_length=1, max_length=MAX_QUERY),
):
    with lease(request) as opened:
        if q is not None:
            with_encoder(opened)
        explanation = opened.recommender.explain(id, seed=pid, text=q)
        return render(
            request, "inspect.html", {"explanation": explanation, "item": card(explanation.paper)}
        )


def all_tags(request: Request) -> dict[str, list[str]]:
    """Every tag with its papers; none when tags.sqlite cannot be read (pages use tags for a list of
    suggestions only: the papers stay readable; the tag pages and the API say what is wrong)."""
    from ..errors import RecommenderError

    try:
        return request.app.state.tags.tags()
    except RecommenderError as error:
        log.warning("tags unavailable: %s", error)
        return {}


def tag_names(request: Request) -> list[str]:
    return list(all_tags(request))


@router.get("/tags", response_class=HTMLResponse)
def tags_page(request: Request):
    return render(request, "tags.html", {"tags": request.app.state.tags.tags()})


def because_card(result) -> dict:
    """A recommendation's card with the seeds it is there because of, each linked to the page
    that shows why, and its reasons (the phrases and closest sentences it shares with them)."""
    return dict(
        card(result.paper, result.score),
        because=[
            {
                "id": seed,
                "handle": handle,
                "cosine": cosine,
                "inspect": urlencode({"id": result.paper.id, "pid": seed}),
            }
            for seed, handle, cosine in result.because
        ],
        phrases=list(result.phrases),
        sentences=list(result.sentences),
    )


@router.get("/tags/", response_class=HTMLResponse, include_in_schema=False)
def tag_page_by_query(
    request: Request, name: str = Query(..., max_length=MAX_TAG), k: int = Query(10, ge=1, le=MAX_K)
):
    """A tag's page for a name no path can carry (".", "..")."""
    return tag_page(request, name, k)


@router.get("/tags/{tag:path}", response_class=HTMLResponse)  # a collection's path holds '/'
def tag_page(
    request: Request,
    tag: str = PathParameter(..., max_length=MAX_TAG),
    k: int = Query(10, ge=1, le=MAX_K),
):
    from ..reading.tags import check_tag

    store = request.app.state.tags
    with lease(request) as opened:
        recommender = opened.recommender
        ids = store.papers(check_tag(tag))
        rows = [
            row for row in (recommender.row_of_id(paper_id) for paper_id in ids) if row is not None
        ]
        tagged = [card(paper) for paper in recommender.papers_at(rows)]
        missing = [paper_id for paper_id in ids if recommender.row_of_id(paper_id) is None]
        cards = (
            [
                because_card(r)
                for r in recommend_for_tags(
                    recommender, store, [tag], k=k, why=True, exclude_seen=[tag]
                )
            ]
            if rows
            else []
        )
        return render(
            request,
            "tag.html",
            {
                "tag": tag,
                "tagged": tagged,
                "missing": missing,
                "cards": cards,
                "tag_names": tag_names(request),
                "not_interested": store.marked(tag, "not"),
                "seen": len(store.marked(tag, "seen")),
            },
        )


@router.get("/feed", response_class=HTMLResponse)
def feed_page(
    request: Request,
    tag: str = Query(..., max_length=MAX_TAG),
    since: str = Query("last", max_length=40),
    k: int = Query(20, ge=1, le=MAX_K),
):
    """A tag's feed (`papers feed`), with the tag page's "Seen" and "Not interested" buttons."""
    from ..reading.feed import WEB
    from ..reading.feed import feed as make_feed

    # The web app's own place in the feed (apart from the digest's): reading it moves nothing;
    # "Mark all read" moves it, the buttons take papers away.
    with lease(request) as opened:
        made = make_feed(
            opened.recommender, request.app.state.tags, [tag], since=since, k=k, reader=WEB
        )
        cards = [because_card(r) for r in made.results]
        return render(
            request,
            "feed.html",
            {"tag": tag, "cards": cards, "feed": made, "tag_names": tag_names(request)},
        )


@router.post("/feed/read")
def feed_read_form(
    request: Request,
    tag: str = Form(..., max_length=MAX_TAG),
    generation: int = Form(..., ge=0),
    csrf: str = Form(""),
):
    """The feed page's "Mark all read": the web app's place in the tag's feed moves to what the
    page showed (papers that arrived since stay new)."""
    from ..reading.feed import WEB, mark_read_up_to

    check_form(request, csrf)
    with lease(request) as opened:
        mark_read_up_to(opened.recommender, request.app.state.tags, [tag], generation, WEB)
    return RedirectResponse(local_path(f"/feed?{urlencode({'tag': tag})}"), status_code=303)


def check_form(request: Request, csrf: str | None) -> None:
    if not csrf_matches(cookie(request, CSRF_COOKIE), csrf):
        raise Refused(
            403, "the form has expired or came from another site: reload the page and try again"
        )
    check_write(request)


@router.post("/tags/add")
def add_tag_form(
    request: Request,
    tag: str = Form(..., max_length=MAX_TAG),
    id: str = Form(..., max_length=MAX_ID),
    csrf: str = Form(""),
    next: str = Form("/"),
):
    check_form(request, csrf)
    write_tag(request, tag.strip(), id)
    return RedirectResponse(local_path(next), status_code=303)


@router.post("/tags/remove")
def remove_tag_form(
    request: Request,
    tag: str = Form(..., max_length=MAX_TAG),
    id: str = Form(..., max_length=MAX_ID),
    csrf: str = Form(""),
    next: str = Form("/"),
):
    check_form(request, csrf)
    write_tag(request, tag.strip(), id, remove=True)
    return RedirectResponse(local_path(next), status_code=303)


def preparing(request: Request, what: str) -> HTMLResponse:
    """The page that says long work is being done, and reloads itself (a meta refresh: no
    script)."""
    response = render(request, "preparing.html", {"what": what}, status=202)
    response.headers["Refresh"] = "3"
    return response


@router.post("/tags/mark")
def mark_form(
    request: Request,
    tag: str = Form(..., max_length=MAX_TAG),
    id: str = Form(..., max_length=MAX_QUERY),
    kind: str = Form(..., max_length=8),
    undo: bool = Form(False),
    csrf: str = Form(""),
    next: str = Form("/"),
):
    """A tag page's "not interested" and "seen" buttons (`papers tags not|seen`), and taking them
    back."""
    check_form(request, csrf)
    with lease(request) as opened:
        (unmark_paper if undo else mark_paper)(
            opened.recommender, request.app.state.tags, tag.strip(), id, kind
        )
    return RedirectResponse(local_path(next), status_code=303)


def compute_sessions_page(index_dir: str, n: int) -> str:
    """The plan's part of the /sessions page (`papers sessions --n`), run in the background process
    with the plan: a plan of thousands of papers takes seconds to render, which on the server's
    event loop would hold every other request of that worker for as long."""
    plan = compute_sessions(index_dir, n)
    return templates().get_template("sessions_plan.html").render(plan=plan, n=n)


@router.get("/sessions", response_class=HTMLResponse)
async def sessions_page(request: Request, n: int = Query(6, ge=1, le=50)):
    plan_html = await wait_for(
        prepared(request, "sessions.html", compute_sessions_page, n), PAGE_WAIT_SECONDS
    )
    if plan_html is None:
        return preparing(request, f"The plan in {n} sessions")
    from markupsafe import Markup

    # Only the page around the plan is drawn here (the form token, the footer): a few lines.
    return render(request, "sessions.html", {"plan_html": Markup(plan_html), "n": n})


@router.get("/map", response_class=HTMLResponse)
async def map_page(request: Request):
    """The explorable map `papers map --out map.html` writes, of every live paper, inside the app's
    page, its script served as a file (no inline script); drawn in the background on the first
    request."""
    # With the layout stored by the build, what is left to draw takes seconds, not minutes: the
    # first request waits for it (off the request path still) rather than show the waiting page.
    with lease(request) as opened:
        stored = stores_whole_index_layout(opened.recommender)
    waited = STORED_MAP_WAIT_SECONDS if stored else PAGE_WAIT_SECONDS
    outcome = await wait_for(prepared(request, "map", compute_map), waited)
    if outcome is None:
        return preparing(request, "The map")
    kind, parts = outcome
    if kind == "refused":
        raise Refused(503, parts)
    from markupsafe import Markup

    # The map inside the app's page (its header, search and footer): its style and body as drawn.
    return render(
        request,
        "map.html",
        {"parts": {"title": parts.title, "style": Markup(parts.style), "body": Markup(parts.body)}},
    )


@router.get("/favicon.ico")
def favicon():
    """Browsers ask for it on pages that name none (the map)."""
    return Response(
        (HERE / "static" / "favicon.svg").read_bytes(),
        media_type="image/svg+xml",
        headers={"Cache-Control": "max-age=86400"},
    )


@router.get("/map.js")
def map_script():
    from ..render.map import map_script as script

    return Response(script(), media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@router.get("/docs", response_class=HTMLResponse)
def docs_page(request: Request):
    """Swagger UI from the installed fastapi-offline (no CDN), started by a script file (no inline
    script)."""
    if swagger_folder() is None:
        raise Refused(
            404,
            "the interactive docs need fastapi-offline (Swagger UI): "
            f"{install_command('serve')}; /openapi.json has the API's description",
        )
    return HTMLResponse(templates().get_template("docs.html").render())
