"""The HTTP edge of the medagent Serve application: OpenAI chat, rerank and interview-session routes.

``POST /v1/retrieve`` belongs to the retrieval application (``actors.apps``), which Serve's proxy prefers
for that path (longest route prefix); the route here documents the contract in ``/openapi.json`` and answers 503
where no retriever is deployed.

Requests pass ``actors.http_edge`` first (JSON only, bounded body and nesting, one log line per refusal,
``nosniff``), are validated by the wire models of ``medagent.api`` (422 naming the field, the input never
echoed) and forwarded to the deployments through handles (the CPU LLM's across applications:
it is ``LLM_APP``, ``actors.backends``); errors a deployment raises for a
request (unknown source, refused prompt) become 4xx here and nowhere deeper. Each call has a deadline
(504 past it). Replies name no file path and forward no backend error text (a 502 says which backend
failed; the log has the rest). The OpenAPI schema is ``/openapi.json``; no ``/docs`` page (Swagger UI
would load its scripts from a CDN onto this origin).

Interview sessions (``medagent.history.live.sessions``): a start is a JSON POST (``{}``) and returns the
session's token, which every later call sends back as ``X-Session-Token``; unknown or expired session, or
another token -> 404, finished or busy session -> 409, too many live sessions or this client's starts ->
429, a failed LLM / retriever call -> 502 (the session keeps its state: send the answer again). ``GET /interview`` serves the page where a person plays the patient
(``actors/static/interview.html`` + ``interview.js``, package data, no build step): it calls the same
session routes and turns each of those refusals into a sentence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

from fastapi import FastAPI, Header, HTTPException, Request, Response
from ray import serve

from actors.http_edge import PAGE_HEADERS, harden, refusal_line
from medagent.api import (
    MAX_ANSWER_CHARS,
    ChatCompletionRequest,
    InterviewAnswerRequest,
    InterviewSessionResponse,
    InterviewStartRequest,
    RerankRequest,
    RerankResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from medagent.llm.base import LLMError
from medagent.llm.endpoints import HandleEndpoint

log = logging.getLogger(__name__)
app = harden(
    FastAPI(
        title="medagent",
        version="1",
        description="LLM (OpenAI-compatible), first-stage retrieval and reranking for the medagent agents.",
        docs_url=None,
        redoc_url=None,
    )
)
T = TypeVar("T")
# Seconds a call may take before the client gets 504 (docs/LIMITS.md). A chat at max_tokens on the CPU
# tier takes well under a minute; an interview turn makes a few model calls, its last one the assessment.
DEADLINE_S = {"chat": 120.0, "rerank": 30.0, "session": 300.0}
# /healthz reports names, never where things are on disk.
PRIVATE_INFO = frozenset({"index_dir"})


# Defined before the class: serve.ingress serialises the class's methods with the globals that exist
# when the decorator runs.
async def _within(what: str, call: Awaitable[T]) -> T:
    """``call`` under its deadline; past it, 504."""
    try:
        return await asyncio.wait_for(call, DEADLINE_S[what])
    except TimeoutError as exc:
        raise HTTPException(504, f"the {what} call took longer than {DEADLINE_S[what]:g}s") from exc


def _backend_failed(what: str, exc: BaseException | str) -> HTTPException:
    """A 502 that names the backend; its own text (paths, engine internals) goes to the log only."""
    log.warning("%s backend failed: %s", what, str(exc)[:2000])
    return HTTPException(502, f"the {what} backend failed; the request can be sent again")


PAGE_FILES = {"interview.html": "text/html; charset=utf-8", "interview.js": "text/javascript; charset=utf-8"}


@lru_cache(maxsize=len(PAGE_FILES))
def page_file(name: str) -> str:
    """A file of the patient page, with the answer limit the API enforces filled in (checked in the page too)."""
    text = resources.files("actors").joinpath("static", name).read_text(encoding="utf-8")
    return text.replace("__MAX_ANSWER_CHARS__", str(MAX_ANSWER_CHARS))


@serve.ingress(app)
class Ingress:
    """Routes to the LLM, reranker and interview-session deployments (any may be absent: 503).

    Args:
        llm: Where the LLM application is (``HandleEndpoint``), or None. Its handle is taken at the first
            chat request, not here: a RayService builds its applications side by side, so this replica
            may start before the LLM's application exists.
        reranker, sessions: Handles to deployments of this application, or None.
        info: What ``/healthz`` reports (``llm_n_ctx`` also bounds ``max_tokens``).
    """

    def __init__(
        self, llm: HandleEndpoint | None, reranker: Any, info: dict[str, Any], sessions: Any = None
    ) -> None:
        self.llm_endpoint = llm
        self.llm: Any = None
        self.reranker = reranker
        self.info = info
        self.sessions = sessions

    def _llm(self) -> Any:
        if self.llm is None and self.llm_endpoint is not None:
            ep = self.llm_endpoint
            try:
                self.llm = serve.get_deployment_handle(ep.deployment, app_name=ep.app)
            except KeyError as exc:  # Serve's answer for a deployment it does not know
                raise HTTPException(503, f"the LLM application {ep.app!r} is not running") from exc
        return self._need(self.llm, "LLM")

    @staticmethod
    def _need(handle: Any, what: str) -> Any:
        if handle is None:
            raise HTTPException(503, f"this application serves no {what}")
        return handle

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: ChatCompletionRequest) -> dict[str, Any]:
        llm = self._llm()
        max_tokens = int(self.info.get("llm_n_ctx") or 0)
        if max_tokens and request.max_tokens > max_tokens:
            raise HTTPException(400, f"max_tokens={request.max_tokens} exceeds the context size {max_tokens}")
        try:
            result: dict[str, Any] = await _within("chat", llm.chat.remote(request.engine_body()))
        except LLMError as exc:
            raise _backend_failed("LLM", exc) from exc
        if "error" in result and "choices" not in result:
            err = result["error"]
            code = int(err.get("code", 400))
            if code >= 500:
                raise _backend_failed("LLM", str(err.get("message", "")))
            # The engine's refusal of a valid-looking request (the prompt exceeds the context): its words.
            raise HTTPException(code, str(err.get("message", "request refused"))[:300])
        # The engine may name its model by file; callers know it by the served name.
        return {**result, "model": self.info.get("llm_served_name") or "medagent"}

    @app.post("/v1/retrieve", response_model=RetrieveResponse)
    async def retrieve(self, request: RetrieveRequest) -> Response:
        """TopK per source. Served by the retrieval application (``actors.retrieval_servers``); a request
        reaches this route only when no retriever is deployed."""
        raise HTTPException(503, "this application serves no retriever")

    @app.post("/v1/rerank", response_model=RerankResponse)
    async def rerank(self, request: RerankRequest) -> dict[str, Any]:
        reranker = self._need(self.reranker, "reranker")
        result: dict[str, Any] = await _within("rerank", reranker.rerank.remote(request.model_dump()))
        return result

    @app.get("/v1/models")
    async def models(self) -> dict[str, Any]:
        served = self.info.get("llm_served_name")
        return {
            "object": "list",
            "data": [{"id": served, "object": "model", "owned_by": "medagent"}] if served else [],
        }

    @app.get("/healthz")
    async def healthz(self) -> dict[str, Any]:
        return {"status": "ok", **{k: v for k, v in self.info.items() if k not in PRIVATE_INFO}}

    # ----------------------------------------------------------------------- history-taking sessions
    async def _session_call(self, op: str, request: Request, **kwargs: Any) -> dict[str, Any]:
        sessions = self._need(self.sessions, "interview sessions (interview_sessions.enabled=false)")
        try:
            result: dict[str, Any] = await _within("session", sessions.call.remote(op, **kwargs))
        except LLMError as exc:
            raise _backend_failed("model or retrieval", exc) from exc
        if "refused" in result:  # a client's mistake: one line, no traceback (actors.interview_sessions)
            status, detail = int(result["refused"]), str(result["detail"])
            refusal_line(request.method, request.url.path, status, detail)
            raise HTTPException(status, detail)
        return result

    @app.post("/v1/interview/sessions", response_model=InterviewSessionResponse, status_code=201)
    async def start_interview(self, body: InterviewStartRequest, request: Request) -> dict[str, Any]:
        """Starts a history-taking session (body ``{}``); the reply carries its id, its token (send it back
        as ``X-Session-Token``) and the agent's first question."""
        client = request.client.host if request.client else ""
        return await self._session_call("start", request, client=client)

    @app.post("/v1/interview/sessions/{session_id}/answer", response_model=InterviewSessionResponse)
    async def answer_interview(
        self,
        session_id: str,
        body: InterviewAnswerRequest,
        request: Request,
        x_session_token: str = Header(default="", max_length=128),
    ) -> dict[str, Any]:
        """The patient's answer; the reply is the next question, or the final assessment (``finished``)."""
        return await self._session_call(
            "answer", request, session_id=session_id, token=x_session_token, answer=body.answer
        )

    @app.get("/v1/interview/sessions/{session_id}", response_model=InterviewSessionResponse)
    async def get_interview(
        self, session_id: str, request: Request, x_session_token: str = Header(default="", max_length=128)
    ) -> dict[str, Any]:
        """The session with the agent's full interview state."""
        return await self._session_call("get", request, session_id=session_id, token=x_session_token)

    @app.delete("/v1/interview/sessions/{session_id}", status_code=204)
    async def delete_interview(
        self, session_id: str, request: Request, x_session_token: str = Header(default="", max_length=128)
    ) -> Response:
        await self._session_call("delete", request, session_id=session_id, token=x_session_token)
        return Response(status_code=204)

    # ------------------------------------------------------------------------ the human patient's page
    @app.get("/interview", include_in_schema=False)
    async def interview_page(self) -> Response:
        """The page where a person plays the patient (works only with interview sessions enabled)."""
        return Response(
            page_file("interview.html"), media_type=PAGE_FILES["interview.html"], headers=PAGE_HEADERS
        )

    @app.get("/interview/interview.js", include_in_schema=False)
    async def interview_script(self) -> Response:
        return Response(
            page_file("interview.js"), media_type=PAGE_FILES["interview.js"], headers=PAGE_HEADERS
        )
