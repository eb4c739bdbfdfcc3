"""CPU LLM server: a llama.cpp engine behind the OpenAI ``/v1/chat/completions`` contract.

A plain class made a Serve deployment by ``actors.builder`` (after Ray's ``LLMServer``): callers inside
the cluster use ``handle.chat.remote(body)``; everything else uses HTTP. Errors become HTTP responses
here, at the edge, and nowhere deeper.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, HTTPException
from ray import serve

from medagent.api import ChatCompletionRequest
from medagent.config import LLMConfig, to_dataclass
from medagent.llm.llamacpp import LlamaCppEngine, LlamaCppSettings
from medagent.models import resolve_model

log = logging.getLogger(__name__)
app = FastAPI(title="medagent LLM (llama.cpp)", version="1")


class LlamaCppServer:
    """Loads the model once per replica; answers handle calls concurrently in worker threads.

    Plain (no HTTP routes) so it can sit behind the application's one ingress; ``LlamaCppHTTPServer``
    adds the OpenAI routes for the stand-alone LLM application.
    """

    def __init__(self, llm: dict[str, Any]) -> None:
        cfg: LLMConfig = to_dataclass(LLMConfig, llm)
        path = resolve_model(cfg.model.spec())
        settings = LlamaCppSettings(
            n_ctx=cfg.n_ctx,
            n_parallel=cfg.n_parallel,
            n_threads=cfg.n_threads,
            engine_kwargs=cfg.engine_kwargs,
        )
        self.cfg = cfg
        self.engine = LlamaCppEngine(path, settings, name=cfg.served_name)

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Handle entry point: an OpenAI request dict in, an OpenAI response dict out.

        A request the engine refuses comes back as an OpenAI error object (not an exception) so the
        caller's retry logic does not retry a request that can never succeed.
        """
        try:
            # The engine call blocks; a thread keeps this replica accepting other requests.
            return await asyncio.to_thread(self.engine.complete_sync, body)
        except ValueError as exc:
            return {"error": {"message": str(exc), "type": "invalid_request_error", "code": 400}}


@serve.ingress(app)
class LlamaCppHTTPServer(LlamaCppServer):
    """``LlamaCppServer`` with its own OpenAI-compatible routes (the stand-alone LLM application)."""

    @app.post("/v1/chat/completions")
    async def chat_completions(self, request: ChatCompletionRequest) -> dict[str, Any]:
        if request.max_tokens > self.cfg.n_ctx:
            raise HTTPException(
                400, f"max_tokens={request.max_tokens} exceeds the context size {self.cfg.n_ctx}"
            )
        result = await self.chat(request.model_dump(exclude_none=True))
        if "error" in result and "choices" not in result:
            err = result["error"]
            raise HTTPException(int(err.get("code", 400)), err.get("message", "request refused"))
        return result

    @app.get("/v1/models")
    async def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": self.cfg.served_name, "object": "model", "owned_by": "medagent"}],
        }
