"""The QA paper's "w/o Tools" ablation: structured instructions, the top documents for the question, one call.

The question text is the query; the reranker's best ``no_tools_docs`` (paper: 3) go into the prompt as
delimited data blocks, and one answer call follows (JSON-schema constrained for multiple choice when the
backend supports it).
"""

from __future__ import annotations

import time

from medagent.agent.answers import answer_schema
from medagent.agent.base import register_agent
from medagent.agent.episode import Episode, FinalAnswer, Retrieval
from medagent.agent.memory import MemoryBank
from medagent.agent.provenance import RETRIEVED, search_records
from medagent.agent.qa import read_answer
from medagent.agent.render import documents_block
from medagent.agent.services import AgentDeps, Reranker, Retriever
from medagent.agent.tools import search_stages
from medagent.agent.trace import preview
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.prompts import load_prompt
from medagent.types import INVALID, Prediction, Question


class NoToolsAgent:
    """One retrieval, one answer call; ``answer(question, memory=None)`` like ``QAAgent``."""

    def __init__(
        self,
        llm: ChatModel,
        cfg: AgentConfig,
        *,
        retriever: Retriever | None,
        reranker: Reranker | None,
        json_schema: bool = True,
    ) -> None:
        if retriever is None or reranker is None:
            raise ValueError("agent mode 'no_tools' needs deps.retriever and deps.reranker")
        self.llm, self.cfg = llm, cfg
        self.retriever, self.reranker = retriever, reranker
        self.json_schema = json_schema and cfg.answer.constrained_answer
        self.prompt = load_prompt("qa_no_tools")

    def new_memory(self, question: Question) -> MemoryBank:
        return MemoryBank(question.id, batch_size=self.cfg.loop.batch_size, top_r=self.cfg.retrieval.top_r)

    async def answer(self, question: Question, memory: MemoryBank | None = None) -> Prediction:
        start = time.perf_counter()
        memory = memory if memory is not None else self.new_memory(question)
        rec = Episode()
        open_ended = self.cfg.open_ended or not question.options
        options = None if open_ended else question.options
        before = rec.snapshot()
        first, docs = await search_stages(
            self.retriever, self.reranker, question.text, self.cfg.retrieval.no_tools_docs, self.cfg, rec
        )
        handles, _ = memory.enqueue(docs)
        retrieved = search_records(first, docs, handles, {})
        shown = [(h, memory.doc(h)) for h in handles]
        for h, d in shown:
            memory.add_context(h, d.content[: self.cfg.loop.doc_max_chars])
        rec.add(
            Retrieval(
                {
                    "query": preview(question.text),
                    "docs": [d.id for _, d in shown],
                    RETRIEVED: retrieved,
                    **rec.delta(before),
                }
            )
        )
        messages = self.prompt.render(
            question=question.text,
            options=options,
            documents=documents_block(shown, self.cfg.loop.doc_max_chars) if shown else "(none found)",
            open_ended=open_ended,
        )
        constrained = options is not None and self.json_schema
        tries = self.cfg.answer_sampling()
        for i, (temperature, top_p) in enumerate(tries):
            resp = await self.llm.chat(
                messages,
                response_format=answer_schema(sorted(options)) if constrained and options else None,
                temperature=temperature,
                top_p=top_p,
                max_tokens=self.cfg.sampling.max_tokens,
                prompt=self.prompt.name,
            )
            answer = read_answer(resp.content, options)
            last = answer != INVALID or i == len(tries) - 1
            retry = {"retry": True} if i else {}  # the QA paper's re-run of an unreadable answer
            kind = "final_answer" if last else "invalid_answer"
            rec.add(
                FinalAnswer(
                    {**rec.llm(resp), "constrained": constrained, "answer": answer, **retry}, kind=kind
                )
            )
            if last:
                break
        memory.finish()
        return Prediction(
            id=question.id,
            benchmark=question.benchmark,
            answer=answer,
            raw=resp.content,
            trace=rec.trace(),
            evidence=memory.records(),
            usage=rec.usage(),
            latency_s=time.perf_counter() - start,
        )


@register_agent("no_tools", retrieval=True)  # the top documents go into its prompt
def _no_tools(llm: ChatModel, cfg: AgentConfig, deps: AgentDeps) -> NoToolsAgent:
    return NoToolsAgent(
        llm, cfg, retriever=deps.retriever, reranker=deps.reranker, json_schema=deps.json_schema
    )
