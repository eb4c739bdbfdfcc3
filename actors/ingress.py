"""The HTTP edge of the medagent Serve application: OpenAI chat, retrieve and rerank routes.

Requests are validated by the wire models of ``medagent.api`` (422 on malformed bodies, missing fields
or oversized inputs) and forwarded to the deployments through handles; errors a deployment raises for a
request (unknown source, refused prompt) become 4xx here and nowhere deeper. OpenAPI lives at ``/docs``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Response
from ray import serve

from medagent.api import (
    ChatCompletionRequest,
    RerankRequest,
    RerankResponse,
    RetrieveRequest,
    RetrieveResponse,
)

app = FastAPI(
    title="medagent",
    version="1",
    description="LLM (OpenAI-compatible), first-stage retrieval and reranking for the medagent agents.",
)


@serve.ingress(app)
class Ingress:
    """Routes to the LLM, retriever and reranker deployments (any may be absent: 503)."""

    def __init__(self, llm: Any, retriever: Any, reranker: Any, info: dict[str, Any]) -> None:
        self.llm = llm
        self.retriever = retriever
        self.reranker = reranker
        self.info = info

    @staticmethod
    def _need(handle: Any, what: str) -> Any:
        if handle is None:
            raise HTTPException(503, f"this application serves no {what}")
        return handle

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: ChatCompletionRequest) -> dict[str, Any]:
        llm = self._need(self.llm, "LLM")
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
        retriever = self._need(self.retriever, "retriever")
        try:
            body: bytes = await retriever.retrieve_json.remote(request.model_dump())
        except ValueError as exc:  # Serve re-raises the replica's ValueError (unknown source)
            raise HTTPException(400, str(exc).splitlines()[-1]) from exc
        # Already a serialised RetrieveResponse: returning a Response skips FastAPI's re-validation and
        # re-encoding of every document (``response_model`` still documents the shape in /docs).
        return Response(content=body, media_type="application/json")

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
