"""The pages, after arxiv-sanity-lite: one list page driven by its address (`?q=`, `?pid=`, `?tags=`), paper
cards with "similar" and "inspect", a page per paper, tags, the map and the sessions."""

from __future__ import annotations

import functools
import secrets
from pathlib import Path
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Form, Path as PathParameter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..corpus.summary import summary
from ..errors import install_command
from ..reading.tags import recommend_for_tags, tag_paper, untag_paper
from .api import MAX_K, MAX_QUERY, check_write, lease, with_encoder
from .security import CSRF_COOKIE, CSRF_FIELD, Refused, csrf_matches
from .state import session_plan

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 25
# /map lays out every paper with its related-work list on the first request (as `papers map` does):
# minutes past this many papers.
MAP_PAPERS = 20_000
MAX_PAGES = 10_000
router = APIRouter(include_in_schema=False)


@functools.lru_cache(maxsize=1)
def templates():
    import jinja2

    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                                     undefined=jinja2.StrictUndefined)
    environment.filters["web_link"] = web_link
    # Every character but letters, digits and "-._~" escaped, "/" too: an ID such as "a/../b" stays one
    # path segment that a browser cannot fold into another path.
    environment.filters["url_part"] = lambda value: quote(str(value), safe="")
    return environment


def web_link(url: str | None) -> str | None:
    """The URL if a browser may follow it from our page (http or https), else None: shown as text."""
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")) and url.isprintable():
        return url
    return None


def render(request: Request, template: str, context: dict, status: int = 200) -> HTMLResponse:
    """A page, with the form token (CSRF) its forms send back; the token cookie set on first visit."""
    csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    access = request.app.state.access
    can_write = access.token is None or access.may_write(None, request.cookies.get("papers_token"))
    page = templates().get_template(template).render(
        **context, csrf=csrf, csrf_field=CSRF_FIELD, can_write=can_write, path=request.url.path,
        here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
        index_name=request.app.state.live.index_dir.name,
    )
    response = HTMLResponse(page, status_code=status)
    if request.cookies.get(CSRF_COOKIE) != csrf:
        response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
    return response


def card(paper, score: float | None = None, seed: str | None = None, text: str | None = None) -> dict:
    """What a paper card shows; `seed`/`text`: what "inspect" explains it against."""
    inspect = {"id": paper.id}
    if seed is not None:
        inspect["pid"] = seed
    elif text is not None:
        inspect["q"] = text
    return {"paper": paper, "score": score, "summary": summary(paper), "inspect": urlencode(inspect)}


def swagger_folder() -> Path | None:
    """Swagger UI 5's files as the fastapi-offline package ships them (served at /swagger: /docs works offline)."""
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
    pid: str | None = Query(None, max_length=MAX_QUERY),
    tags: str | None = Query(None, max_length=MAX_QUERY),
    k: int = Query(25, ge=1, le=MAX_K),
    page: int = Query(1, ge=1, le=MAX_PAGES),
):
    q = q.strip() if q else None
    with lease(request) as opened:
        recommender = opened.recommender
        context = {"q": q or "", "pid": pid, "tags": tags, "k": k, "page": page, "next_page": None, "seed": None}
        if q:
            with_encoder(opened)
            results = recommender.search(q, k=k)
            context.update(heading=f"Papers about “{q}”", cards=[card(r.paper, r.score, text=q) for r in results])
        elif pid:
            results = recommender.like(pid, k=k)
            seed = recommender.show(pid)
            context.update(heading="Papers like", seed=card(seed),
                           cards=[card(r.paper, r.score, seed=seed.id) for r in results])
        elif tags:
            names = [name.strip() for name in tags.split(",") if name.strip()]
            results = recommend_for_tags(recommender, request.app.state.tags, names, k=k)
            context.update(heading=f"Recommended for {', '.join(names)}",
                           cards=[card(r.paper, r.score) for r in results])
        else:
            papers, following = recommender.papers_page((page - 1) * PAGE_SIZE, PAGE_SIZE)
            context.update(heading=f"{len(recommender):,} papers", cards=[card(paper) for paper in papers],
                           next_page=page + 1 if following is not None else None)
        context["tag_names"] = list(request.app.state.tags.tags())
        return render(request, "index.html", context)


@router.get("/paper/{paper_id:path}", response_class=HTMLResponse)
def paper_page(request: Request, paper_id: str = PathParameter(..., max_length=MAX_QUERY)):
    with lease(request) as opened:
        recommender = opened.recommender
        paper = recommender.show(paper_id)
        similar = recommender.like(paper.id, k=10)
        tagged = [name for name, ids in request.app.state.tags.tags().items() if paper.id in ids]
        return render(request, "paper.html", {
            "item": card(paper), "cards": [card(r.paper, r.score, seed=paper.id) for r in similar],
            "tagged": tagged, "tag_names": list(request.app.state.tags.tags()),
        })


@router.get("/inspect", response_class=HTMLResponse)
def inspect_page(
    request: Request,
    id: str = Query(..., max_length=MAX_QUERY),
    pid: str | None = Query(None, max_length=MAX_QUERY),
    q: str | None = Query(None, min_length=1, max_length=MAX_QUERY),
):
    with lease(request) as opened:
        if q is not None:
            with_encoder(opened)
        explanation = opened.recommender.explain(id, seed=pid, text=q)
        return render(request, "inspect.html", {"explanation": explanation, "item": card(explanation.paper)})


@router.get("/tags", response_class=HTMLResponse)
def tags_page(request: Request):
    return render(request, "tags.html", {"tags": request.app.state.tags.tags()})


@router.get("/tags/{tag}", response_class=HTMLResponse)
def tag_page(request: Request, tag: str = PathParameter(..., max_length=64), k: int = Query(10, ge=1, le=MAX_K)):
    from ..reading.tags import check_tag

    store = request.app.state.tags
    with lease(request) as opened:
        recommender = opened.recommender
        ids = store.papers(check_tag(tag))
        rows = [row for row in (recommender.keys.row_of_id(paper_id) for paper_id in ids) if row is not None]
        tagged = [card(paper) for paper in recommender.papers_at(rows)]
        missing = [paper_id for paper_id in ids if recommender.keys.row_of_id(paper_id) is None]
        cards = [card(r.paper, r.score) for r in recommend_for_tags(recommender, store, [tag], k=k)] if rows else []
        return render(request, "tag.html", {"tag": tag, "tagged": tagged, "missing": missing, "cards": cards,
                                            "tag_names": list(store.tags())})


def local_path(target: str | None) -> str:
    """Where a form sends the browser back to: a path of this server only (no open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")) and target.isprintable():
        return target
    return "/"


def check_form(request: Request, csrf: str | None) -> None:
    if not csrf_matches(request.cookies.get(CSRF_COOKIE), csrf):
        raise Refused(403, "the form has expired or came from another site: reload the page and try again")
    check_write(request)


@router.post("/tags/add")
def add_tag_form(request: Request, tag: str = Form(..., max_length=64), id: str = Form(..., max_length=MAX_QUERY),
                 csrf: str = Form(""), next: str = Form("/")):
    check_form(request, csrf)
    with lease(request) as opened:
        tag_paper(opened.recommender, request.app.state.tags, tag.strip(), id)
    return RedirectResponse(local_path(next), status_code=303)


@router.post("/tags/remove")
def remove_tag_form(request: Request, tag: str = Form(..., max_length=64), id: str = Form(..., max_length=MAX_QUERY),
                    csrf: str = Form(""), next: str = Form("/")):
    check_form(request, csrf)
    with lease(request) as opened:
        untag_paper(opened.recommender, request.app.state.tags, tag.strip(), id)
    return RedirectResponse(local_path(next), status_code=303)


@router.get("/sessions", response_class=HTMLResponse)
def sessions_page(request: Request, n: int = Query(6, ge=1, le=50)):
    with lease(request) as opened:
        plan = session_plan(opened, n)
        return render(request, "sessions.html", {"plan": plan, "n": n})


@router.get("/map", response_class=HTMLResponse)
def map_page(request: Request):
    """The explorable map `papers map --out map.html` writes, its script served as a file (no inline script)."""
    from ..reading.layout import build_map
    from ..render.map import render_html

    with lease(request) as opened:
        recommender = opened.recommender
        if len(recommender) > MAP_PAPERS:
            raise Refused(503, f"a map of {len(recommender):,} papers takes too long to draw on request (at most "
                               f"{MAP_PAPERS:,}): write it once with `papers map --out map.html`")
        page = opened.cached("map", lambda: render_html(build_map(recommender), script_url="/map.js"))
        return HTMLResponse(page)


@router.get("/favicon.ico")
def favicon():
    """Browsers ask for it on pages that name none (the map)."""
    return Response((HERE / "static" / "favicon.svg").read_bytes(), media_type="image/svg+xml",
                    headers={"Cache-Control": "max-age=86400"})


@router.get("/map.js")
def map_script():
    from ..render.map import map_script as script

    return Response(script(), media_type="text/javascript", headers={"Cache-Control": "no-cache"})


@router.get("/docs", response_class=HTMLResponse)
def docs_page(request: Request):
    """Swagger UI from the installed fastapi-offline (no CDN), started by a script file (no inline script)."""
    if swagger_folder() is None:
        raise Refused(404, "the interactive docs need fastapi-offline (Swagger UI): "
                           f"{install_command('serve')}; /openapi.json has the API's description")
    return HTMLResponse(templates().get_template("docs.html").render())
