"""The serving-API clients the agents use: request shapes, ordering, retries and refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from medagent.agent.remote_services import RemoteReranker, RemoteRetriever, ServiceError
from medagent.agent.services import Doc, Reranker, Retriever
from medagent.llm.base import LLMError


def _doc(i: int, source: str = "medquad", score: float = 0.0) -> dict[str, Any]:
    return {"id": f"c{i}", "score": score, "source": source, "title": f"T{i}", "content": f"text {i}",
            "doc_id": f"d{i}", "parent_id": None}  # fmt: skip


def test_retriever_builds_the_request_and_sorts_by_score() -> None:
    seen: list[dict[str, Any]] = []

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"query_id": "q", "results": {}, "documents": [_doc(1, score=0.2), _doc(2, "bioasq", 0.9)]}

    r = RemoteRetriever(call)
    assert isinstance(r, Retriever)
    docs = asyncio.run(r.retrieve("cough", 8, sources=["medquad"], mode="hybrid", return_parents=True))
    assert [d.id for d in docs] == ["c2", "c1"] and docs[0].source == "bioasq"
    assert seen == [{"query": "cough", "top_k": 8, "sources": ["medquad"], "mode": "hybrid",
                     "return_parents": True}]  # fmt: skip


def test_reranker_names_candidates_by_position_and_keeps_top_r() -> None:
    docs = [Doc.from_dict(_doc(i)) for i in range(3)] + [Doc.from_dict({**_doc(0), "source": "bioasq"})]
    seen: list[dict[str, Any]] = []

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"results": {"3": 0.9, "1": 0.5}}

    rr = RemoteReranker(call)
    assert isinstance(rr, Reranker)
    out = asyncio.run(rr.rerank("q", docs, top_r=2))
    # Two documents share the id c0 (different sources): positions keep them apart.
    assert [(d.id, d.source, d.score) for d in out] == [("c0", "bioasq", 0.9), ("c1", "medquad", 0.5)]
    assert [c["id"] for c in seen[0]["candidates"]] == ["0", "1", "2", "3"]
    assert seen[0]["candidates"][1]["text"] == "T1\ntext 1" and seen[0]["top_r"] == 2
    assert asyncio.run(rr.rerank("q", [], top_r=2)) == []


def test_transient_failures_are_retried_then_reported_as_service_errors() -> None:
    calls = {"n": 0}

    async def flaky(body: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("replica restarting")
        return {"documents": [_doc(1)]}

    assert len(asyncio.run(RemoteRetriever(flaky, backoff_s=0.0).retrieve("q", 1))) == 1

    async def dead(body: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("gone")

    with pytest.raises(ServiceError, match="after 3 attempts") as info:
        asyncio.run(RemoteRetriever(dead, max_retries=2, backoff_s=0.0).retrieve("q", 1))
    assert isinstance(info.value, LLMError)  # the worker records it against the question


def test_a_refused_request_is_not_retried() -> None:
    calls = {"n": 0}

    async def refuse(body: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        raise ValueError("unknown source(s) ['nejm']")

    with pytest.raises(ValueError, match="nejm"):
        asyncio.run(RemoteRetriever(refuse, backoff_s=0.0).retrieve("q", 1, sources=["nejm"]))
    assert calls["n"] == 1
