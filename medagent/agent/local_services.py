"""``Retriever`` and ``Reranker`` in this process, over ``Searcher`` and ``EmbeddingReranker``.

For a laptop without Serve, the single-process baselines of ``benchmarks/`` and step-by-step debugging
of one question (``scripts`` and notebooks); the pipelines use the Serve deployments instead. The blocking
model calls run in a worker thread so the event loop keeps serving other questions.
"""

from __future__ import annotations

import asyncio
from typing import Any

from medagent.agent.remote_services import candidate_text
from medagent.agent.services import Doc


class LocalRetriever:
    """TopK per source from a ``medagent.retrieval.search.Searcher``."""

    def __init__(self, searcher: Any, default_mode: str = "dense") -> None:
        self.searcher = searcher
        self.default_mode = default_mode

    def _search(
        self, query: str, top_k: int, sources: list[str] | None, mode: str, parents: bool
    ) -> list[Doc]:
        ranked = self.searcher.search({"q": query}, top_k, sources, mode, parents)["q"]
        docs = self.searcher.documents(list(ranked))
        return [
            Doc(d.id, d.source, d.title, d.content, float(ranked[d.id]), d.doc_id, d.parent_id) for d in docs
        ]

    async def retrieve(
        self,
        query: str,
        top_k: int,
        *,
        sources: list[str] | None = None,
        mode: str | None = None,
        return_parents: bool | None = None,
    ) -> list[Doc]:
        docs = await asyncio.to_thread(
            self._search, query, top_k, sources, mode or self.default_mode, bool(return_parents)
        )
        return sorted(docs, key=lambda d: -d.score)


class LocalReranker:
    """TopR by a ``medagent.retrieval.rerank.EmbeddingReranker``."""

    def __init__(self, reranker: Any) -> None:
        self.reranker = reranker

    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        from medagent.retrieval.rerank import Candidate

        if not docs or top_r <= 0:
            return []
        candidates = [Candidate(str(i), candidate_text(d)) for i, d in enumerate(docs)]
        scores = await asyncio.to_thread(self.reranker.rerank, query, candidates, top_r)
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])[:top_r]
        out = []
        for key, score in ranked:
            d = docs[int(key)]
            out.append(Doc(d.id, d.source, d.title, d.content, float(score), d.doc_id, d.parent_id))
        return out
