"""``enable_search``: two-stage retrieval (TopK per source, then the reranker's TopR) into the memory bank."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from medagent.agent.episode import Episode
from medagent.agent.provenance import RETRIEVED, search_records, seen_handles
from medagent.agent.render import documents_block
from medagent.agent.services import Doc, Reranker, Retriever
from medagent.agent.toolargs import ToolError, text_arg
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.config import AgentConfig

QUERY_CHARS = 300


async def search_stages(
    retriever: Retriever, reranker: Reranker, query: str, top_r: int, cfg: AgentConfig, rec: Episode
) -> tuple[list[Doc], list[Doc]]:
    """TopK per source, then the reranker's TopR: (the first stage's candidates, what the reranker kept);
    both calls are timed as retrieval."""
    start = time.perf_counter()
    docs = await retriever.retrieve(
        query, cfg.retrieval.top_k, sources=cfg.retrieval.sources, mode=cfg.retrieval.mode
    )
    rec.retrieval(time.perf_counter() - start)
    if not docs:
        return [], []
    start = time.perf_counter()
    ranked = await reranker.rerank(query, docs, top_r)
    rec.retrieval(time.perf_counter() - start)
    return docs, ranked[:top_r]


async def search_docs(
    retriever: Retriever, reranker: Reranker, query: str, top_r: int, cfg: AgentConfig, rec: Episode
) -> list[Doc]:
    """The documents ``search_stages`` kept."""
    return (await search_stages(retriever, reranker, query, top_r, cfg, rec))[1]


class SearchArgs(BaseModel):
    query: str = Field(max_length=QUERY_CHARS, description="a focused search query")


class EnableSearch(Tool):
    name = "enable_search"
    description = "Search the medical literature; the top documents are queued for review."
    args = SearchArgs
    searches = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        if ctx.retriever is None or ctx.reranker is None:
            raise ToolError(ctx.say("search_unavailable"))
        memory, cfg = ctx.memory, ctx.cfg
        query = text_arg(args, "query")
        if query.casefold() in (s.casefold() for s in memory.searches):
            raise ToolError(ctx.say("search_repeated", query=repr(query)))
        memory.searches.append(query)
        seen = seen_handles(ctx.rec.trace())
        first, docs = await search_stages(
            ctx.retriever, ctx.reranker, query, cfg.retrieval.top_r, cfg, ctx.rec
        )
        handles, duplicates = memory.enqueue(docs)
        summary = {
            "retrieved": len(docs),
            "candidates": len(first),
            "new": handles,
            "duplicates": duplicates,
            RETRIEVED: search_records(first, docs, handles, seen),
        }
        if ctx.memory_kind == "context":
            # The ablation without the memory bank: the results go straight into the conversation.
            shown = [(h, memory.doc(h)) for h in handles]
            for h, d in shown:
                memory.add_context(h, d.content[: cfg.loop.doc_max_chars])
            body = documents_block(shown, cfg.loop.doc_max_chars) if shown else ctx.say("search_no_new")
            return ToolResult(ctx.say("search_shown", query=repr(query), body=body), summary)
        if not handles:
            return ToolResult(ctx.say("search_nothing_new", query=repr(query)), summary)
        queued = ctx.say(
            "search_queued", new=len(handles), duplicates=duplicates, queued=len(memory.queue),
            batch_size=memory.batch_size, batches_left=memory.batches_left,
        )  # fmt: skip
        return ToolResult(queued, summary)
