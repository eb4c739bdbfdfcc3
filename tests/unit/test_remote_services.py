"""The serving-API clients the agents use: request shapes, ordering, retries and refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from medagent.agent.remote_services import MalformedResponse, RemoteReranker, RemoteRetriever, ServiceError
from medagent.agent.services import Doc, Reranker, Retriever
from medagent.api import RerankCandidate, RerankRequest, RerankResponse, RetrieveRequest, RetrieveResponse
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
    docs = [Doc(**_doc(i)) for i in range(3)] + [Doc(**{**_doc(0), "source": "bioasq"})]
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
        return {"query_id": "q", "results": {"c1": 0.0}, "documents": [_doc(1)]}

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


def test_requests_are_the_wire_models_and_carry_only_what_the_caller_set() -> None:
    seen: list[dict[str, Any]] = []

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        if "candidates" in body:
            return {"results": {"0": 0.5}}
        return {"query_id": "q", "results": {}, "documents": []}

    asyncio.run(RemoteRetriever(call).retrieve("cough", 4))
    asyncio.run(RemoteRetriever(call).retrieve("x" * 5000, 4, sources=[], mode="", return_parents=False))
    asyncio.run(RemoteReranker(call).rerank("cough", [Doc(**_doc(1))], top_r=3))
    # The bodies the clients always sent: the server's defaults (query_id, mode...) stay the server's.
    assert seen[0] == {"query": "cough", "top_k": 4}
    assert seen[1] == {"query": "x" * 4096, "top_k": 4, "return_parents": False}
    assert seen[2] == {"query": "cough", "candidates": [{"id": "0", "text": "T1\ntext 1"}], "top_r": 1}
    # ...and each is what the server's model reads back, field for field.
    assert RetrieveRequest.model_validate(seen[0]) == RetrieveRequest(query="cough", top_k=4)
    expected = RerankRequest(query="cough", candidates=[RerankCandidate(id="0", text="T1\ntext 1")], top_r=1)
    assert RerankRequest.model_validate(seen[2]) == expected


def test_a_request_outside_the_contract_fails_before_it_is_sent() -> None:
    async def call(body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("sent")

    with pytest.raises(ValueError, match="mode"):  # pydantic's ValidationError is a ValueError
        asyncio.run(RemoteRetriever(call).retrieve("q", 1, mode="psychic"))
    with pytest.raises(ValueError, match="top_k"):
        asyncio.run(RemoteRetriever(call).retrieve("q", 10**6))


def test_the_document_type_round_trips_through_the_wire() -> None:
    doc = Doc(id="c1#0", source="pubmed", title="T", content="text", score=0.25, doc_id="c1", parent_id="c1")
    served = RetrieveResponse(query_id="q", results={doc.id: doc.score}, documents=[doc])
    wire = served.model_dump(mode="json")
    assert wire["documents"] == [
        {"id": "c1#0", "source": "pubmed", "title": "T", "content": "text", "score": 0.25, "doc_id": "c1",
         "parent_id": "c1"}
    ]  # fmt: skip
    assert RetrieveResponse.model_validate_json(served.model_dump_json()).documents == [doc]

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        return wire

    assert asyncio.run(RemoteRetriever(call).retrieve("q", 1)) == [doc]


@pytest.mark.parametrize(
    "answer",
    [
        {"query_id": "q", "results": {}},  # no documents
        {"query_id": "q", "results": {}, "documents": [{"score": 1.0, "source": "pubmed"}]},  # no id
        {"query_id": "q", "results": {}, "documents": [{**_doc(1), "score": "high"}]},
    ],
)
def test_a_malformed_retrieve_response_names_the_model(answer: dict[str, Any]) -> None:
    async def call(body: dict[str, Any]) -> dict[str, Any]:
        return answer

    with pytest.raises(MalformedResponse, match="not a RetrieveResponse") as info:
        asyncio.run(RemoteRetriever(call, backoff_s=0.0).retrieve("q", 1))
    assert isinstance(info.value, ServiceError)  # recorded against the question, like a dead endpoint


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ({"scores": {"0": 1.0}}, "not a RerankResponse"),
        ({"results": {"0": "high"}}, "not a RerankResponse"),
        ({"results": {"7": 1.0}}, "candidate '7'"),
        ({"results": {"c1": 1.0}}, "candidate 'c1'"),
    ],
)
def test_a_malformed_rerank_response_is_a_clear_error(answer: dict[str, Any], match: str) -> None:
    async def call(body: dict[str, Any]) -> dict[str, Any]:
        return answer

    with pytest.raises(MalformedResponse, match=match):
        asyncio.run(RemoteReranker(call).rerank("q", [Doc(**_doc(0)), Doc(**_doc(1))], top_r=2))


def test_the_rerank_response_is_the_wire_model() -> None:
    async def call(body: dict[str, Any]) -> dict[str, Any]:
        return RerankResponse(results={"1": 0.75, "0": 0.5}).model_dump()

    out = asyncio.run(RemoteReranker(call).rerank("q", [Doc(**_doc(0)), Doc(**_doc(1))], top_r=2))
    assert out == [Doc(**{**_doc(1), "score": 0.75}), Doc(**{**_doc(0), "score": 0.5})]
