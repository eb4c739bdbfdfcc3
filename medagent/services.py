"""Retrieval and reranking as async protocols, and the document they return.

Neutral ground for every agent that grounds its answers in retrieved text: the QA agent
(``medagent.agent``) and the history-taking agent (``medagent.history``) both use these, and neither
imports the other. ``medagent.agent.remote_services`` implements them over a Serve deployment handle or
over HTTP; tests pass in-memory fakes. The shapes are those of ``medagent.api`` (``RetrievedDocument``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Doc:
    """One retrieved document (a chunk, or its parent in parent–child mode).

    ``id`` is the chunk id the index returned (unique per source); ``doc_id`` the source document's id.
    """

    id: str
    source: str
    title: str
    content: str
    score: float = 0.0
    doc_id: str = ""
    parent_id: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Doc:
        return cls(
            id=str(d["id"]),
            source=str(d.get("source", "")),
            title=str(d.get("title", "")),
            content=str(d.get("content", "")),
            score=float(d.get("score", 0.0)),
            doc_id=str(d.get("doc_id", "")),
            parent_id=d.get("parent_id"),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
