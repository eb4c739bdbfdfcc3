"""Retrieval and reranking as async protocols, and the document they return.

Neutral ground for every agent that grounds its answers in retrieved text: the QA agent
(``medagent.agent``) and the history-taking agent (``medagent.history``) both use these, and neither
imports the other. ``medagent.agent.remote_services`` implements them over a Serve deployment handle or
over HTTP; tests pass in-memory fakes. Documents are ``medagent.api.Doc``, the one document type from the searcher through the wire to the agents.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from medagent.api import Doc

__all__ = ["Doc", "Reranker", "Retriever"]


@runtime_checkable
class Retriever(Protocol):
    async def retrieve(
        self,
        query: str,
        top_k: int,
        *,
        sources: list[str] | None = None,
        mode: str | None = None,
        return_parents: bool | None = None,
    ) -> list[Doc]:
        """TopK per source, all sources' results together, best first (the server's fused order)."""
        ...


@runtime_checkable
class Reranker(Protocol):
    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        """The ``top_r`` best of ``docs`` for ``query``, best first, with the reranker's score."""
        ...
