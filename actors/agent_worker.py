"""Ray Data callable class that runs an agent on batches of questions.

One long-lived actor holds the LLM client (and, for the tool-using agents, the per-question memory
banks). ``__call__`` is a coroutine, so Ray Data runs the actor as an async actor and feeds it several
batches at once (RAY_DATA_DEFAULT_ASYNC_BATCH_UDF_MAX_CONCURRENCY, default 4); questions from all of them
run concurrently up to ``agent.max_concurrency``, so throughput scales with questions in flight rather
than with the number of actors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from actors.common import chat_model_for, services_for, validate_columns
from actors.metrics import meters
from medagent.agent import AgentDeps, build_agent
from medagent.config import AgentConfig, LLMConfig, to_dataclass
from medagent.llm.base import ChatModel, LLMError
from medagent.llm.endpoints import LLMEndpoint, ServicesEndpoint
from medagent.retrieval.holdout import HeldOutRetriever, evidence_articles, holding_out
from medagent.types import INVALID, Prediction, Question

REQUIRED_INPUT_KEYS = ("id", "question")
ChatModelFactory = Callable[[LLMConfig, LLMEndpoint], ChatModel]


def validate_inputs(batch: dict[str, Any], stage: str = "AgentWorker") -> None:
    validate_columns(batch, REQUIRED_INPUT_KEYS, stage)


class AgentWorker:
    """``map_batches`` UDF: columns ``id``, ``question`` (JSON of a ``Question``) -> ``id``, ``prediction``.

    Args:
        agent: ``AgentConfig`` as a dict.
        llm: ``LLMConfig`` as a dict.
        llm_endpoint: Where the LLM is (``medagent.llm.endpoints``): a deployment handle in-cluster, or
            HTTP for vLLM / external endpoints.
        services_endpoint: where the retriever and reranker are (``actors.builder.services_endpoint``);
            None for the modes that do not search.
        kill_once_file: Chaos hook (``RunConfig.kill_worker_once_file``).
        chat_model_factory: ``(llm_cfg, llm_endpoint) -> ChatModel`` (default ``chat_model_for``); tests
            inject a scripted model to run the real Ray Data pool without an LLM.
    """

    def __init__(
        self,
        agent: dict[str, Any],
        llm: dict[str, Any],
        llm_endpoint: LLMEndpoint,
        services_endpoint: ServicesEndpoint | None = None,
        kill_once_file: str | None = None,
        chat_model_factory: ChatModelFactory | None = None,
    ) -> None:
        self.llm_cfg: LLMConfig = to_dataclass(LLMConfig, llm)
        self.agent_cfg: AgentConfig = to_dataclass(AgentConfig, agent).within(self.llm_cfg.max_output_tokens)
        self.endpoint = llm_endpoint
        self.services_endpoint = services_endpoint
        self.chat_model_factory = chat_model_factory or chat_model_for
        self._agent = self._build()
        self._sem = asyncio.Semaphore(self.agent_cfg.max_concurrency)
        # The memory bank of every question in flight in this actor, by question id (the design card's
        # "per-question agent work keeps its memory bank in actor state"); dropped once answered.
        self.memory_banks: dict[str, Any] = {}
        self.kill_once_file = kill_once_file

    def _build(self) -> Any:
        llm = self.chat_model_factory(self.llm_cfg, self.endpoint)
        services = services_for(self.services_endpoint)
        if self.agent_cfg.retrieval.hold_out_own_evidence and "retriever" in services:
            services["retriever"] = HeldOutRetriever(services["retriever"])
        deps = AgentDeps(
            **services,
            json_schema=self.llm_cfg.supports_json_schema,
            tool_calls=self.llm_cfg.tool_calls,
            tool_choice=self.llm_cfg.tool_choice,
            logprobs=self.llm_cfg.supports_logprobs,
        )
        return build_agent(self.agent_cfg, llm, deps)

    async def _answer(self, q: Question) -> Prediction:
        async with self._sem:
            new_memory = getattr(self._agent, "new_memory", None)
            mode = self.agent_cfg.mode
            # This task's searches leave the question's own articles out (none unless configured).
            held = evidence_articles(q) if self.agent_cfg.retrieval.hold_out_own_evidence else frozenset()
            try:
                with holding_out(held):
                    if new_memory is None:
                        pred: Prediction = await self._agent.answer(q)
                    else:
                        self.memory_banks[q.id] = new_memory(q)
                        pred = await self._agent.answer(q, memory=self.memory_banks[q.id])
                meters().tool_calls(pred)
                return pred
            except LLMError as exc:
                # An endpoint (LLM, retriever, reranker) failed for this question: record it, keep the
                # batch going. Any other exception is a bug in our code and propagates.
                return Prediction(
                    id=q.id, benchmark=q.benchmark, answer=INVALID, error=f"{type(exc).__name__}: {exc}"
                )
            finally:
                bank = self.memory_banks.pop(q.id, None)
                if bank is not None:  # answered or failed: the bank's size when the question ended
                    meters().memory_bank(bank, mode)

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        validate_inputs(batch)
        questions = [Question.from_dict(json.loads(s)) for s in batch["question"]]
        preds = await asyncio.gather(*(self._answer(q) for q in questions))
        if self.kill_once_file:
            self._maybe_die()
        return {"id": [p.id for p in preds], "prediction": [json.dumps(p.to_dict()) for p in preds]}

    def _maybe_die(self) -> None:
        """Chaos hook (``kill_worker_once_file``): die after a finished batch, before returning it."""
        import os

        assert self.kill_once_file is not None
        try:
            fd = os.open(self.kill_once_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)
