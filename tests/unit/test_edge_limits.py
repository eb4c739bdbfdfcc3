"""Limits of the retrieval route and the reranker, and a config that cannot serve what it promises:
findings 2, 6 and 9 of the edge review, on fakes (no Ray, no model)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from starlette.requests import Request

from actors.retrieval_servers import RetrieverHTTPServer
from medagent.agent.remote_services import RemoteReranker
from medagent.api import MAX_CANDIDATES, MAX_QUERY_ID_CHARS, Doc, RetrieveRequest, RetrieveResponse
from medagent.config import InterviewSessionsConfig
from medagent.history.live.sessions import check_context
from pipelines.serve_app import compose_serve_config


def post(server: RetrieverHTTPServer, body: bytes, ctype: str = "application/json") -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/retrieve",
        "root_path": "/v1/retrieve",
        "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())],
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def go() -> tuple[int, bytes]:
        response = await server(Request(scope, receive))
        return response.status_code, bytes(response.body)

    return asyncio.run(go())


@pytest.fixture
def retriever() -> RetrieverHTTPServer:
    server = object.__new__(RetrieverHTTPServer)  # no index: the refusals come before any search
    searched: list[RetrieveRequest] = []

    async def search(req: RetrieveRequest) -> RetrieveResponse:
        searched.append(req)
        return RetrieveResponse(query_id=req.query_id, results={}, documents=[])

    server._search = search  # type: ignore[method-assign]
    server.searched = searched  # type: ignore[attr-defined]
    return server


def test_the_retrieve_route_is_json_only_bounded_and_never_echoes(retriever: Any) -> None:
    assert post(retriever, b'{"query": "q"}', "text/plain")[0] == 415
    assert post(retriever, b'{"query": "caf\xff"}')[0] == 400  # invalid UTF-8: a client's mistake
    status, body = post(
        retriever, json.dumps({"query": "q", "query_id": "x" * (MAX_QUERY_ID_CHARS + 1)}).encode()
    )
    assert status == 422 and json.loads(body)["detail"][0]["loc"] == "query_id" and len(body) < 500
    status, body = post(retriever, json.dumps({"query": "x" * 100_000}).encode())
    assert status == 422 and len(body) < 500  # the 100,000 characters are not sent back
    assert post(retriever, b'{"query": "\\ud800"}')[0] == 422
    assert post(retriever, b"[" * 200 + b"]" * 200)[0] == 400
    assert retriever.searched == []
    assert post(retriever, b'{"query": "fever", "query_id": "q1"}') == (
        200,
        b'{"query_id":"q1","results":{},"documents":[]}',
    )


def test_a_client_with_more_candidates_than_one_request_holds_splits_them_exactly() -> None:
    requests: list[dict[str, Any]] = []

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        requests.append(body)
        # Scores that depend on the candidate only (as cosine similarity does).
        return {"results": {c["id"]: float(len(c["text"])) for c in body["candidates"]}}

    docs = [Doc(id=f"d{i}", source="s", title="", content="x" * (i % 50 + 1)) for i in range(100)]
    ranked = asyncio.run(RemoteReranker(call).rerank("q", docs, top_r=10))
    assert len(requests) == -(-100 // MAX_CANDIDATES)
    assert all(len(r["candidates"]) <= MAX_CANDIDATES for r in requests)
    best = sorted(docs, key=lambda d: (-len(d.content), int(d.id[1:])))[:10]
    assert ranked == [replace(d, score=float(len(d.content))) for d in best]


def test_an_llm_slot_too_small_for_the_sessions_fails_at_start_naming_the_numbers() -> None:
    small = compose_serve_config(
        ["llm=smollm2-135m-cpu", "llm.n_ctx=4096", "interview_sessions.enabled=true"]
    )
    with pytest.raises(ValueError, match=r"about [\d,]+ tokens .*holds 2,048 per conversation \(n_ctx=4,096"):
        check_context(small.interview_sessions, small.llm)
    for overrides in [["llm=smollm2-135m-cpu"], []]:  # the shipped configs serve an interview
        cfg = compose_serve_config([*overrides, "interview_sessions.enabled=true"])
        check_context(cfg.interview_sessions, cfg.llm)


def test_the_session_deployment_refuses_a_small_slot_before_building_its_agent() -> None:
    from dataclasses import asdict

    from actors.interview_sessions import InterviewSessions

    small = compose_serve_config(
        ["llm=smollm2-135m-cpu", "llm.n_ctx=2048", "interview_sessions.enabled=true"]
    )
    with pytest.raises(ValueError, match="per conversation"):
        InterviewSessions(asdict(small.interview_sessions), asdict(small.llm), llm_client=None)
    assert isinstance(small.interview_sessions, InterviewSessionsConfig)
