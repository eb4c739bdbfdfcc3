"""What every HTTP route of the medagent applications shares at the edge: bounded request bodies, JSON only,
short client-error replies, and the browser-safety headers.

``EdgeMiddleware`` (plain ASGI, so the FastAPI ingress, the LLM application and the retrieval application's
Starlette handler share it) checks a request before anything parses it:

- a body-carrying method must say ``Content-Type: application/json`` (415 otherwise): a page on another
  site can send ``text/plain`` or a form without a CORS preflight, but not JSON;
- the body is at most ``MAX_BODY_BYTES`` (413, counted while it arrives, so a 20 MB body is never held);
- it is UTF-8 (400) and nested at most ``MAX_JSON_DEPTH`` deep (400), found on the raw bytes, so a deep
  body never reaches a recursive parser or a validation error that would print it.

A refusal is one log line (method, path, status, reason), never a traceback, and its reply never echoes
the input. ``validation_error_reply`` does the same for the wire models' 422: each error names its field
(``messages.0.content``) with pydantic's message, the input left out. Our own bugs are not caught here:
they still raise and Serve logs them in full.

Every response carries ``X-Content-Type-Options: nosniff``; ``PAGE_HEADERS`` are the pages' own (CSP with
scripts from this origin only, no framing).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydantic import ValidationError

from medagent.api import MAX_BODY_BYTES, MAX_JSON_DEPTH

log = logging.getLogger("medagent.edge")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
NOSNIFF = (b"x-content-type-options", b"nosniff")
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
MAX_ERRORS = 10  # validation errors listed in one 422
MAX_MSG_CHARS = 200  # characters of one error message
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth_exceeds(body: bytes, max_depth: int) -> bool:
    """Whether ``body`` nests arrays/objects deeper than ``max_depth`` (brackets inside strings ignored).

    Linear in C for every body within the limit: strings are cut out, then innermost ``[]``/``{}`` pairs are
    removed ``max_depth`` times. Only when brackets are left (too deep, or unbalanced: the parser's 422 then
    says so) are they counted one by one, stopping at the limit.
    """
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    reduced = brackets
    for _ in range(max_depth):
        if not reduced:
            return False
        reduced = reduced.replace(b"[]", b"").replace(b"{}", b"")
    if not reduced:
        return False
    depth = 0
    for b in brackets:
        depth += 1 if b in b"[{" else -1
        if depth > max_depth:
            return True
    return False


def error_body(detail: Any) -> bytes:
    return json.dumps({"detail": detail}, ensure_ascii=True).encode()


def _loc(loc: tuple[Any, ...]) -> str:
    """``("body", "messages", 0, "content", "function-after[...]")`` -> ``messages.0.content``."""
    named = [str(p) for p in loc if isinstance(p, int) or re.fullmatch(r"[A-Za-z_][\w-]*", str(p))]
    return ".".join(named[1:] if named[:1] == ["body"] else named) or "body"


def short_errors(errors: list[Any]) -> list[dict[str, str]]:
    """Validation errors as ``{"loc", "msg", "type"}``: the field named, the input never echoed."""
    out = []
    for e in errors[:MAX_ERRORS]:
        msg = str(e.get("msg", ""))
        out.append(
            {
                "loc": _loc(tuple(e.get("loc", ()))),
                "msg": msg if len(msg) <= MAX_MSG_CHARS else msg[:MAX_MSG_CHARS] + "...",
                "type": str(e.get("type", "")),
            }
        )
    if len(errors) > MAX_ERRORS:
        out.append({"loc": "", "msg": f"... and {len(errors) - MAX_ERRORS} more errors", "type": "truncated"})
    return out


def refusal_line(method: str, path: str, status: int, reason: str) -> None:
    """The one log line of a client mistake."""
    log.info("refused %s %s: %d %s", method, path[:200], status, reason[:300])


def validation_error_reply(method: str, path: str, exc: ValidationError | Any) -> tuple[int, bytes]:
    """A 422 for a wire model's ``ValidationError`` (or FastAPI's ``RequestValidationError``)."""
    errors = short_errors(list(exc.errors()))
    first = errors[0] if errors else {"loc": "body", "msg": "invalid"}
    refusal_line(method, path, 422, f"{first['loc']}: {first['msg']}")
    return 422, error_body(errors)


class EdgeMiddleware:
    """The checks of the module docstring, before the application sees the request."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES, max_depth: int = MAX_JSON_DEPTH
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == NOSNIFF[0] for k, _ in headers):
                    headers.append(NOSNIFF)
                message["headers"] = headers
            await send(message)

        method = scope.get("method", "GET")
        if method not in BODY_METHODS:
            await self.app(scope, receive, send_nosniff)
            return
        refusal, body = await check_body(scope, receive, self.max_body_bytes, self.max_depth)
        if refusal is not None:
            status, reason = refusal
            refusal_line(method, scope.get("path", ""), status, reason)
            await _reply(send_nosniff, status, error_body(reason))
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # a disconnect, after the body

        await self.app(scope, replay, send_nosniff)


async def check_body(
    scope: Scope, receive: Receive, max_body_bytes: int = MAX_BODY_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> tuple[tuple[int, str] | None, bytes]:
    """The body of a JSON request, or why it is refused (status, reason)."""
    headers = {k.lower(): v for k, v in scope.get("headers", [])}
    media = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if media != b"application/json":
        shown = media.decode("latin-1")[:60] or "none"
        return (415, f"Content-Type must be application/json (got {shown})"), b""
    declared = headers.get(b"content-length", b"")
    if declared.isdigit() and int(declared) > max_body_bytes:
        return (413, f"body larger than {max_body_bytes} bytes"), b""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return (400, "client disconnected"), b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_body_bytes:
            return (413, f"body larger than {max_body_bytes} bytes"), b""
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (400, f"body is not UTF-8 (byte {exc.start})"), b""
    if json_depth_exceeds(body, max_depth):
        return (400, f"JSON nested deeper than {max_depth} levels"), b""
    return None, body


async def _reply(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def harden(app: Any) -> Any:
    """Adds ``EdgeMiddleware`` and the short 422 to a FastAPI application; returns it."""
    from fastapi.exceptions import RequestValidationError
    from starlette.requests import Request
    from starlette.responses import Response

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        status, body = validation_error_reply(request.method, request.url.path, exc)
        return Response(body, status_code=status, media_type="application/json")

    app.add_middleware(EdgeMiddleware)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    return app
