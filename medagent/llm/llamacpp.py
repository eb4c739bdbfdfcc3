"""A local llama.cpp engine (xllamacpp) that answers OpenAI-style chat requests in-process.

It is the CPU stand-in for vLLM: the Serve deployment in ``actors/llm_deployment.py`` wraps it behind the
same ``/v1/chat/completions`` contract, and the plain-process baseline of ``benchmarks/`` calls it
directly. xllamacpp is imported lazily so the library imports without the ``cpu`` extra.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.llm.base import CompletionChatModel, LLMError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LlamaCppSettings:
    """Engine knobs; ``engine_kwargs`` passes any other ``xllamacpp.CommonParams`` attribute through."""

    n_ctx: int = 8192
    n_parallel: int = 2
    n_threads: int = 2
    n_gpu_layers: int = 0
    seed: int = 0
    # llama.cpp logs every slot event at INFO; 0 keeps warnings and errors only.
    verbosity: int = 0
    engine_kwargs: dict[str, Any] = field(default_factory=dict)


class LlamaCppEngine(CompletionChatModel):
    """Holds one ``xllamacpp.Server``; thread-safe (the server queues requests into its slots)."""

    def __init__(
        self, model_path: str | Path, settings: LlamaCppSettings | None = None, name: str = ""
    ) -> None:
        try:
            import xllamacpp
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "xllamacpp is missing: install the CPU extra with `pip install -e .[cpu]`"
            ) from exc
        s = settings or LlamaCppSettings()
        params = xllamacpp.CommonParams()
        params.model.path = str(model_path)
        params.n_ctx = s.n_ctx
        params.n_parallel = s.n_parallel
        params.cpuparams.n_threads = s.n_threads
        params.cpuparams_batch.n_threads = s.n_threads
        params.n_gpu_layers = s.n_gpu_layers
        params.sampling.seed = s.seed
        params.warmup = False
        params.verbosity = s.verbosity
        for key, value in s.engine_kwargs.items():
            if not hasattr(params, key):
                raise ValueError(f"unknown xllamacpp.CommonParams field in engine_kwargs: {key!r}")
            setattr(params, key, value)
        start = time.perf_counter()
        self._server = xllamacpp.Server(params)
        self.model = name or Path(model_path).name
        self.load_s = time.perf_counter() - start
        log.info(
            "loaded %s in %.1fs (n_ctx=%d, n_parallel=%d)", self.model, self.load_s, s.n_ctx, s.n_parallel
        )

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answers one OpenAI request body (blocking); malformed requests raise ``ValueError``."""
        body = {**body, "model": self.model}
        result = self._server.handle_chat_completions(body)
        if not isinstance(result, dict):
            raise LLMError(f"llama.cpp returned {type(result).__name__}, expected a dict")
        return result

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Async form for in-process use (the single-process baseline); runs in a worker thread."""
        return await asyncio.to_thread(self.complete_sync, body)
