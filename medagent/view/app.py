"""The viewer's web app: a read-only JSON API over loaded runs, and one static page (package data).

Safe by construction: every response carries a strict Content-Security-Policy (scripts only from this
server's ``/static/app.js``, no inline script, no plugins, no frames), the page renders every value with
``textContent``, the API answers GET only, and a file is read only through ``paths.confined``. The Host
header must name the address served (a web page that rebinds its own name to 127.0.0.1 cannot read runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from medagent.view import interviews, questions
from medagent.view.paths import OutsideRunError, confined
from medagent.view.runs import ViewRun

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
STATIC = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}
# Files of a run the page may link to, by suffix; any other file is served as plain text.
FILE_TYPES = {".png": "image/png", ".svg": "text/plain", ".json": "application/json"}


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` to every response (errors included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _static(name: str) -> Response:
    body = resources.files("medagent.view").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC[name])


def _int(request: Request, name: str, default: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError as e:
        raise ValueError(f"{name} must be an integer, got {value!r}") from e


def build_app(
    runs: Sequence[ViewRun], notes: Sequence[str] = (), hosts: Sequence[str] = ("127.0.0.1",)
) -> Starlette:
    """The app over ``runs`` (loaded once by the caller); ``hosts`` are the Host names it answers to
    (``*`` for any, when served beyond loopback on purpose)."""
    ids = questions.question_ids(runs)
    by_index = {vr.index: vr for vr in runs}

    def run_of(request: Request) -> ViewRun:
        index = _int(request, "run")
        if index not in by_index:
            raise LookupError(f"no run {index}")
        return by_index[index]  # type: ignore[index]

    async def index(_: Request) -> Response:
        return _static("index.html")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return JSONResponse({"error": "not found"}, status_code=404)
        return _static(name)

    async def api_runs(_: Request) -> Response:
        return JSONResponse(
            {"runs": [vr.summary for vr in runs], "notes": list(notes), "questions": len(ids)}
        )

    async def api_questions(request: Request) -> Response:
        p = request.query_params
        body = questions.page(
            runs,
            ids,
            offset=_int(request, "offset", 0) or 0,
            limit=_int(request, "limit", 50) or 50,
            flip=p.get("flip") or None,
            a=_int(request, "a"),
            b=_int(request, "b"),
            sort=p.get("sort") or "order",
            search=p.get("search") or "",
        )
        return JSONResponse(body)

    async def api_question(request: Request) -> Response:
        qid = request.query_params.get("id", "")
        if qid not in set(ids):
            return JSONResponse({"error": f"no question {qid!r}"}, status_code=404)
        return JSONResponse(questions.detail(runs, qid))

    async def api_interviews(request: Request) -> Response:
        vr = run_of(request)
        return JSONResponse({"run": vr.index, "label": vr.label, "interviews": interviews.listing(vr)})

    async def api_interview(request: Request) -> Response:
        body = interviews.detail(run_of(request), request.query_params.get("id", ""))
        if body is None:
            return JSONResponse({"error": "no such interview"}, status_code=404)
        return JSONResponse(body)

    async def api_file(request: Request) -> Response:
        vr = run_of(request)
        path = confined(vr.path, request.query_params.get("path", ""))
        media = FILE_TYPES.get(path.suffix.lower(), "text/plain; charset=utf-8")
        return Response(path.read_bytes(), media_type=media)

    async def refused(_: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=404)

    async def bad_request(_: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=400)

    handlers: dict[Any, Any] = {OutsideRunError: refused, LookupError: refused, ValueError: bad_request}
    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/runs", api_runs),
        Route("/api/questions", api_questions),
        Route("/api/question", api_question),
        Route("/api/interviews", api_interviews),
        Route("/api/interview", api_interview),
        Route("/api/file", api_file),
    ]
    middleware = [Middleware(SecurityHeaders), Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))]
    return Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
