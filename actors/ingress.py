"""The HTTP edge of the medagent Serve application: OpenAI chat, rerank and interview-session routes.

``POST /v1/retrieve`` belongs to the retrieval application (``actors.apps``), which Serve's proxy prefers
for that path (longest route prefix); the route here documents the contract in ``/docs`` and answers 503
where no retriever is deployed.

Requests are validated by the wire models of ``medagent.api`` (422 on malformed bodies, missing fields
or oversized inputs) and forwarded to the deployments through handles (the CPU LLM's across applications:
it is ``LLM_APP``, ``actors.backends``); errors a deployment raises for a
request (unknown source, refused prompt) become 4xx here and nowhere deeper. OpenAPI lives at ``/docs``.

Interview sessions (``medagent.history.live.sessions``): unknown or expired session -> 404, finished or busy
session -> 409, too many live sessions -> 429, a failed LLM / retriever call -> 502 (the session keeps its
state: send the answer again). ``GET /interview`` serves the page where a person plays the patient
(``actors/static/interview.html`` + ``interview.js``, package data, no build step): it calls the same
session routes and turns each of those refusals into a sentence.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException, Response
from ray import serve

from medagent.api import (
    MAX_ANSWER_CHARS,
    ChatCompletionRequest,
    InterviewAnswerRequest,
    InterviewSessionResponse,
    RerankRequest,
    RerankResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from medagent.history.live.sessions import SessionConflict, SessionLimitReached, SessionNotFound
from medagent.llm.base import LLMError
from medagent.llm.endpoints import HandleEndpoint

app = FastAPI(
    title="medagent",
    version="1",
    description="LLM (OpenAI-compatible), first-stage retrieval and reranking for the medagent agents.",
)


# Defined before the class: serve.ingress serialises the class's methods with the globals that exist
# when the decorator runs.
def _message(exc: Exception) -> str:
    """The replica's own message (the last line of a re-raised Ray error)."""
    lines = [x for x in str(exc).splitlines() if x.strip()]
    return re.sub(r"^[\w.]+: ", "", lines[-1]) if lines else type(exc).__name__


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
        result: dict[str, Any] = await llm.chat.remote(request.model_dump(exclude_none=True))
        if "error" in result and "choices" not in result:
            err = result["error"]
            raise HTTPException(int(err.get("code", 400)), err.get("message", "request refused"))
        return result

    @app.post("/v1/retrieve", response_model=RetrieveResponse)
    async def retrieve(self, request: RetrieveRequest) -> Response:
        """TopK per source. Served by the retrieval application (``actors.retrieval_servers``); a request
        reaches this route only when no retriever is deployed."""
        raise HTTPException(503, "this application serves no retriever")

    @app.post("/v1/rerank", response_model=RerankResponse)
    async def rerank(self, request: RerankRequest) -> dict[str, Any]:
        reranker = self._need(self.reranker, "reranker")
        result: dict[str, Any] = await reranker.rerank.remote(request.model_dump())
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
        return {"status": "ok", **self.info}

    # ----------------------------------------------------------------------- history-taking sessions
    async def _session_call(self, method: str, *args: Any) -> Any:
        sessions = self._need(self.sessions, "interview sessions (interview_sessions.enabled=false)")
        try:
            return await getattr(sessions, method).remote(*args)
        # Serve re-raises the replica's exception as a subclass of its type.
        except SessionNotFound as exc:
            raise HTTPException(404, _message(exc)) from exc
        except SessionConflict as exc:
            raise HTTPException(409, _message(exc)) from exc
        except SessionLimitReached as exc:
            raise HTTPException(429, _message(exc)) from exc
        except LLMError as exc:
            raise HTTPException(502, f"model or retrieval endpoint failed: {_message(exc)}") from exc

    @app.post("/v1/interview/sessions", response_model=InterviewSessionResponse, status_code=201)
    async def start_interview(self) -> dict[str, Any]:
        """Starts a history-taking session; the reply carries its id and the agent's first question."""
        result: dict[str, Any] = await self._session_call("start")
        return result

    @app.post("/v1/interview/sessions/{session_id}/answer", response_model=InterviewSessionResponse)
    async def answer_interview(self, session_id: str, request: InterviewAnswerRequest) -> dict[str, Any]:
        """The patient's answer; the reply is the next question, or the final assessment (``finished``)."""
        result: dict[str, Any] = await self._session_call("answer", session_id, request.answer)
        return result

    @app.get("/v1/interview/sessions/{session_id}", response_model=InterviewSessionResponse)
    async def get_interview(self, session_id: str) -> dict[str, Any]:
        """The session with the agent's full interview state."""
        result: dict[str, Any] = await self._session_call("get", session_id)
        return result

    @app.delete("/v1/interview/sessions/{session_id}", status_code=204)
    async def delete_interview(self, session_id: str) -> Response:
        await self._session_call("delete", session_id)
        return Response(status_code=204)

    # ------------------------------------------------------------------------ the human patient's page
    @app.get("/interview", include_in_schema=False)
    async def interview_page(self) -> Response:
        """The page where a person plays the patient (works only with interview sessions enabled)."""
        return Response(page_file("interview.html"), media_type=PAGE_FILES["interview.html"])

    @app.get("/interview/interview.js", include_in_schema=False)
    async def interview_script(self) -> Response:
        return Response(page_file("interview.js"), media_type=PAGE_FILES["interview.js"])
