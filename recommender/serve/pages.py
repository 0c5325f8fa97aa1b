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
    flash = read_flash(cookie(request, FLASH_COOKIE))
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
            flash=flash,
        )
    )
    response = HTMLResponse(page, status_code=status)
    server = request.scope.get("server")
    if cookie(request, FLASH_COOKIE) is not None:  # said once: a reload does not say it again
        response.delete_cookie(cookie_name(FLASH_COOKIE, server[1] if server else None))
    if cookie(request, CSRF_COOKIE) != csrf:
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
            context.update(_search_view(opened, q, k))
        elif pid:
            context.update(_like_view(recommender, pid, k))
        elif tags:
            context.update(_tags_view(request, recommender, tags, k))
        else:
            context.update(_browse_view(recommender, page))
        context["tag_names"] = tag_names(request)
        return render(request, "index.html", context)


def _search_view(opened, q: str, k: int) -> dict[str, Any]:
    """The home page's heading and cards for a search."""
    with_encoder(opened)
    results = opened.recommender.search(q, k=k)
    return dict(
        heading=f"Papers about “{q}”",
        cards=[card(r.paper, r.score, text=q) for r in results],
    )


def _like_view(recommender, pid: str, k: int) -> dict[str, Any]:
    """The home page's heading, seed and cards for the papers like one."""
    results = recommender.like(pid, k=k)
    seed = recommender.show(pid)
    return dict(
        heading="Papers like",
        seed=card(seed),
        cards=[card(r.paper, r.score, seed=seed.id) for r in results],
    )


def _tags_view(request: Request, recommender, tags: str, k: int) -> dict[str, Any]:
    """The home page's heading, tags and cards for the papers recommended for tags."""
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
    return dict(
        tag_list=names,
        heading=(
            "Recommended for all tags"
            if tags.strip() == "*"
            else f"Recommended for {', '.join(names)}"
        ),
        cards=[card(r.paper, r.score) for r in results],
    )


def _browse_view(recommender, page: int) -> dict[str, Any]:
    """The home page's heading, cards and next page for one page of the collection."""
    papers, following = recommender.papers_page((page - 1) * PAGE_SIZE, PAGE_SIZE)
    return dict(
        heading=f"{len(recommender):,} papers",
        cards=[card(paper) for paper in papers],
        next_page=page + 1 if following is not None else None,
    )


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
        collections = collections_of(request)
        return render(
            request,
            "paper.html",
            {
                "item": card(paper),
                "cards": [card(r.paper, r.score, seed=paper.id) for r in similar],
                "tagged": tagged,
                # a collection of the library the index was built from: not removable here
                "in_collection": [name for name in tagged if paper.id in collections.get(name, ())],
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


def collections_of(request: Request) -> dict[str, list[str]]:
    """The index's collections (tags the user cannot edit here), none when they cannot be read."""
    from ..errors import RecommenderError

    try:
        return request.app.state.tags.collections()
    except RecommenderError as error:
        log.warning("collections unavailable: %s", error)
        return {}


def collected_ids(request: Request, tag: str) -> list[str]:
    return collections_of(request).get(tag, [])


def marked_rows(recommender, ids: list[str]) -> list[dict]:
    """Marked papers as a page lists them: ID and title (the ID alone for one a rebuild dropped)."""
    rows = []
    for paper_id in ids:
        row = recommender.row_of_id(paper_id)
        paper = recommender.papers_at([row])[0] if row is not None else None
        rows.append({"id": paper_id, "title": (paper.title or paper.handle) if paper else paper_id})
    return rows


def tag_names(request: Request) -> list[str]:
    return list(all_tags(request))


@router.get("/tags", response_class=HTMLResponse)
def tags_page(request: Request):
    from ..reading.tags import items_note

    store = request.app.state.tags
    found = store.tags()
    notes = {name: items_note(len(ids), store.left_out(name)) for name, ids in found.items()}
    return render(request, "tags.html", {"tags": found, "notes": notes})


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
    from ..reading.tags import check_tag, items_note

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
                "marks": [
                    (kind, MARK_WORDS[kind], marked_rows(recommender, store.marked(tag, kind)))
                    for kind in ("not", "seen")
                ],
                "collected": collected_ids(request, tag),
                "items_note": items_note(len(ids), store.left_out(tag)),
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


FLASH_COOKIE = "papers_flash"
FLASH_BYTES = (
    3000  # a cookie holds about 4 KB: past this, the message names no paper and offers no undo
)
MARK_WORDS = {"not": "not interested", "seen": "seen"}


def flash_message(did: str, tag: str, title: str, kind: str | None = None) -> str:
    """What a form's action did, in words: made here from the action, never read from a request."""
    shown = f"“{title}”" if title else "the paper"
    mark = MARK_WORDS.get(kind or "", kind or "")
    return {
        "tagged": f"Tagged {shown} “{tag}”.",
        "untagged": f"Removed the tag “{tag}” from {shown}.",
        "already tagged": f"{shown} already had the tag “{tag}”: nothing changed.",
        "not tagged": f"{shown} did not have the tag “{tag}”: nothing changed.",
        "marked": f"Marked {shown} {mark} for “{tag}”"
        + (
            ": its recommendations are now unlike it."
            if kind == "not"
            else ": it is left out of its recommendations."
        ),
        "unmarked": f"Took back the {mark} mark of {shown} for “{tag}”.",
        "already marked": f"{shown} was already marked {mark} for “{tag}”: nothing changed.",
        "not marked": f"{shown} was not marked {mark} for “{tag}”: nothing changed.",
    }[did]


# The action that undoes each: the form it posts (and whether it is a mark taken back).
UNDO = {
    "tagged": ("/tags/remove", False),
    "untagged": ("/tags/add", False),
    "marked": ("/tags/mark", True),
    "unmarked": ("/tags/mark", False),
}


def set_flash(
    response: Response,
    request: Request,
    did: str,
    tag: str,
    paper_id: str,
    title: str,
    kind: str | None = None,
) -> None:
    """Say on the next page what an action did (a cookie read once, after the redirect: a link
    cannot make the page say anything), with the form that undoes it."""
    import base64
    import json

    fields = {"did": did, "tag": tag, "id": paper_id, "title": title[:120], "kind": kind}
    value = json.dumps(fields, ensure_ascii=False).encode("utf-8")
    if len(value) > FLASH_BYTES:  # an ID of thousands of characters: say it, without an undo
        fields = {"did": did, "tag": tag[:200], "id": None, "title": "", "kind": kind}
        value = json.dumps(fields, ensure_ascii=False).encode("utf-8")
    server = request.scope.get("server")
    response.set_cookie(
        cookie_name(FLASH_COOKIE, server[1] if server else None),
        base64.urlsafe_b64encode(value).decode("ascii"),
        httponly=True,
        samesite="strict",
    )


def read_flash(value: str | None) -> dict | None:
    """The message of the flash cookie and its undo form, or None (none, or not one we wrote)."""
    import base64
    import binascii
    import json

    if not value:
        return None
    try:
        fields = json.loads(base64.urlsafe_b64decode(value.encode("ascii")))
        did, tag, kind = fields["did"], str(fields["tag"]), fields.get("kind")
        paper_id, title = fields.get("id"), str(fields.get("title") or "")
        text = flash_message(did, tag, title, kind)
        text = text[:1].upper() + text[1:]
    except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error):
        return None
    undo = None
    if did in UNDO and isinstance(paper_id, str):
        action, taking_back = UNDO[did]
        undo = {"action": action, "tag": tag, "id": paper_id, "kind": kind, "undo": taking_back}
    return {"text": text, "undo": undo}


def paper_title(request: Request, paper_id: str) -> str:
    """A paper's title (or handle) for a message; its ID when this index does not hold it."""
    from ..errors import PaperNotFoundError

    with lease(request) as opened:
        recommender = opened.recommender
        try:
            paper = recommender.show(paper_id)
        except PaperNotFoundError:
            return paper_id
        return paper.title or paper.handle or paper_id


def resolved_id(request: Request, reference: str) -> str:
    """The ID of the paper a form names; as given when this index does not hold it (a tagged
    paper a rebuild dropped can still be untagged)."""
    from ..errors import PaperNotFoundError

    with lease(request) as opened:
        try:
            return opened.recommender.id_of(opened.recommender.resolve(reference))
        except PaperNotFoundError:
            return reference


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
    tag = tag.strip()
    paper_id = resolved_id(request, id)
    before = request.app.state.tags.papers(tag) if tag else []
    write_tag(request, tag, paper_id)
    response = RedirectResponse(local_path(next), status_code=303)
    did = "already tagged" if paper_id in before else "tagged"
    set_flash(response, request, did, tag, paper_id, paper_title(request, paper_id))
    return response


@router.post("/tags/remove")
def remove_tag_form(
    request: Request,
    tag: str = Form(..., max_length=MAX_TAG),
    id: str = Form(..., max_length=MAX_ID),
    csrf: str = Form(""),
    next: str = Form("/"),
):
    check_form(request, csrf)
    tag = tag.strip()
    paper_id = resolved_id(request, id)
    before = request.app.state.tags.papers(tag) if tag else []
    write_tag(request, tag, paper_id, remove=True)
    response = RedirectResponse(local_path(next), status_code=303)
    did = "untagged" if paper_id in before else "not tagged"
    set_flash(response, request, did, tag, paper_id, paper_title(request, paper_id))
    return response


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
    back (`papers tags unmark`)."""
    check_form(request, csrf)
    tag = tag.strip()
    store = request.app.state.tags
    with lease(request) as opened:
        before = store.marked(tag, kind) if kind in MARK_WORDS and tag else []
        after = (unmark_paper if undo else mark_paper)(opened.recommender, store, tag, id, kind)
    paper_id = resolved_id(request, id)
    changed = (paper_id in before) != (paper_id in after)
    did = (
        ("unmarked" if changed else "not marked")
        if undo
        else ("marked" if changed else "already marked")
    )
    response = RedirectResponse(local_path(next), status_code=303)
    set_flash(response, request, did, tag, paper_id, paper_title(request, paper_id), kind)
    return response


def compute_sessions_page(index_dir: str, n: int) -> str:
    """The plan's part of the /sessions page (`papers sessions --n`), run in the background process
    with the plan: a plan of thousands of papers takes seconds to render, which on the server's
    event loop would hold every other request of that worker for as long."""
    from markupsafe import Markup, escape

    from ..render.sessions import overflow_line

    plan = compute_sessions(index_dir, n)

    def overflow(session) -> Markup:
        def name(paper) -> str:
            link = templates().filters["paper_url"](paper.id)
            return f'<a href="{escape(link)}">{escape(paper.title or paper.handle)}</a>'

        return Markup(overflow_line(plan, session, escape, name))

    return templates().get_template("sessions_plan.html").render(plan=plan, n=n, overflow=overflow)


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
