"""CPU LLM server: a llama.cpp engine behind the OpenAI ``/v1/chat/completions`` contract.

A plain class made a Serve deployment by ``actors.builder`` (after Ray's ``LLMServer``): callers inside
the cluster use ``handle.chat.remote(body)``; everything else uses HTTP. Errors become HTTP responses
here, at the edge, and nowhere deeper.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from fastapi import FastAPI, HTTPException
from ray import serve

from actors.http_edge import harden
from medagent.api import ChatCompletionRequest
from medagent.config import LLMConfig, to_dataclass
from medagent.llm.llamacpp import LlamaCppEngine, llamacpp_settings
from medagent.models import resolve_model

log = logging.getLogger(__name__)
app = harden(FastAPI(title="medagent LLM (llama.cpp)", version="1", docs_url=None, redoc_url=None))


class Engine(Protocol):
    """What the server needs of an engine: one OpenAI request body in, one response dict out (blocking)."""

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]: ...


EngineFactory = Callable[[LLMConfig], Engine]


def llamacpp_engine(cfg: LLMConfig) -> LlamaCppEngine:
    """The default engine: the model resolved (local path -> PyPI-shipped -> hub) and loaded in llama.cpp."""
    return LlamaCppEngine(resolve_model(cfg.model.spec()), llamacpp_settings(cfg), name=cfg.served_name)


class LlamaCppServer:
    """Loads the model once per replica; answers handle calls concurrently in worker threads.

    Plain (no HTTP routes): the engine and its handle API, which workers and the HTTP product's ingress
    call; ``LlamaCppHTTPServer`` adds the OpenAI routes of the LLM application.

    Args:
        llm: ``LLMConfig`` as a dict.
        engine_factory: Builds the engine from the config (default ``llamacpp_engine``); tests inject a
            scripted engine so the real Serve wiring runs without a model (Ray's ``MockVLLMEngine`` pattern).
    """

    def __init__(self, llm: dict[str, Any], engine_factory: EngineFactory | None = None) -> None:
        cfg: LLMConfig = to_dataclass(LLMConfig, llm)
        self.cfg = cfg
        self.engine = (engine_factory or llamacpp_engine)(cfg)

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
        result = await self.chat(request.engine_body())
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
