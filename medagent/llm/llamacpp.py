"""A local llama.cpp engine (xllamacpp) that answers OpenAI-style chat requests in-process.

It is the CPU stand-in for vLLM: the Serve deployment in ``actors/llm_deployment.py`` wraps it behind the
same ``/v1/chat/completions`` contract, and the plain-process baseline of ``benchmarks/`` calls it
directly. xllamacpp is imported lazily so the library imports without the ``cpu`` extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medagent.config import LLMConfig
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
    # Pin each conversation to one slot (``id_slot``, chosen from its opening messages) so its next turn
    # finds its prefix in that slot's KV cache; off, llama.cpp picks the idle slot with the most similar
    # prompt (``slot_prompt_similarity``) and restores evicted prompts from its RAM cache (``cache_ram_mib``).
    slot_affinity: bool = False
    # Speculative decoding from the context's own n-grams (one of ``SPECULATIVE``); "none": off. Verification
    # is greedy at temperature 0, so it changes how fast tokens come, not which.
    speculative: str = "none"
    engine_kwargs: dict[str, Any] = field(default_factory=dict)


# llama.cpp's draft-free speculative types (``common_speculative_type``): ``ngram_simple`` looks the last
# tokens up in the context, ``ngram_map_k`` / ``ngram_mod`` keep a map of the context's n-grams, and
# ``ngram_cache`` a cache across requests.
SPECULATIVE = ("none", "ngram_simple", "ngram_map_k", "ngram_mod", "ngram_cache")


def llamacpp_settings(cfg: LLMConfig) -> LlamaCppSettings:
    """The engine settings of an ``llm`` config (``llm.n_ctx``, ``n_parallel``, ``n_threads``, ...)."""
    return LlamaCppSettings(
        n_ctx=cfg.n_ctx,
        n_parallel=cfg.n_parallel,
        n_threads=cfg.n_threads,
        slot_affinity=cfg.slot_affinity,
        speculative=cfg.speculative,
        engine_kwargs=dict(cfg.engine_kwargs),
    )


# Messages that identify a conversation: the instructions and the first request (an agent's later turns
# append to them; a tool's own call starts a different conversation).
AFFINITY_MESSAGES = 2
# Conversations remembered by the slot map (oldest forgotten first).
AFFINITY_MEMORY = 4096


class SlotMap:
    """Pins conversations to slots: a new conversation gets the slot holding the fewest remembered
    conversations (a hash would put two of a handful on one slot and leave another idle)."""

    def __init__(self, n_slots: int) -> None:
        self.n_slots = max(n_slots, 1)
        self._slots: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(messages: list[dict[str, Any]]) -> str:
        text = json.dumps(messages[:AFFINITY_MESSAGES], sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def slot(self, messages: list[dict[str, Any]]) -> int:
        key = self.key(messages)
        with self._lock:
            if key in self._slots:
                self._slots.move_to_end(key)
                return self._slots[key]
            load = [0] * self.n_slots
            for s in self._slots.values():
                load[s] += 1
            chosen = load.index(min(load))
            self._slots[key] = chosen
            if len(self._slots) > AFFINITY_MEMORY:
                self._slots.popitem(last=False)
            return chosen


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
        if s.speculative not in SPECULATIVE:
            raise ValueError(f"llm.speculative must be one of {SPECULATIVE}, got {s.speculative!r}")
        if s.speculative != "none":
            kind = getattr(
                xllamacpp.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{s.speculative.upper()}"
            )
            params.speculative.types = [kind]
        for key, value in s.engine_kwargs.items():
            if not hasattr(params, key):
                raise ValueError(f"unknown xllamacpp.CommonParams field in engine_kwargs: {key!r}")
            setattr(params, key, value)
        start = time.perf_counter()
        self._server = xllamacpp.Server(params)
        self._slot_map = SlotMap(s.n_parallel) if s.slot_affinity else None
        self.model = name or Path(model_path).name
        self.load_s = time.perf_counter() - start
        log.info("loaded %s in %.1fs (n_ctx=%d, n_parallel=%d, speculative=%s)", self.model, self.load_s,
                 s.n_ctx, s.n_parallel, s.speculative)  # fmt: skip

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answers one OpenAI request body (blocking); malformed requests raise ``ValueError``."""
        body = {**body, "model": self.model}
        if self._slot_map is not None and "id_slot" not in body:
            body["id_slot"] = self._slot_map.slot(body.get("messages") or [])
        result = self._server.handle_chat_completions(body)
        if not isinstance(result, dict):
            raise LLMError(f"llama.cpp returned {type(result).__name__}, expected a dict")
        return result

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Async form for in-process use (the single-process baseline); runs in a worker thread."""
        return await asyncio.to_thread(self.complete_sync, body)
