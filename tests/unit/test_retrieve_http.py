"""``RetrieverHTTPServer.__call__``, the retrieval application's HTTP contract, without Ray: the index
search is replaced, the request is a real Starlette one built from an ASGI scope."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request

from actors.retrieval_servers import RetrieverHTTPServer
from medagent.api import Doc, RetrieveRequest, RetrieveResponse


class _Searcher:
    sources = ("pubmed", "textbooks")


class _Server(RetrieverHTTPServer):
    """The real handler and ``_search`` (its source check, its timing); only the batched index search under
    them is replaced, and there is no index to load."""

    def __init__(self) -> None:
        self.searcher = _Searcher()  # type: ignore[assignment]
        self._recent: deque[float] = deque(maxlen=8)
        self.seen: list[RetrieveRequest] = []

    async def _batched_search(self, req: RetrieveRequest) -> RetrieveResponse:  # type: ignore[override]
        self.seen.append(req)
        doc = Doc(id="d1", score=1.0, source="pubmed", title="t", content="c", doc_id="d")
        return RetrieveResponse(query_id=req.query_id, results={"d1": 1.0}, documents=[doc])


def _call(server: _Server, method: str, path: str = "/v1/retrieve", body: bytes = b"") -> Any:
    scope = {
        "type": "http", "method": method, "path": path, "root_path": "/v1/retrieve",
        "query_string": b"", "headers": [(b"content-type", b"application/json")],
    }  # fmt: skip
    sent = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return sent.pop(0) if sent else {"type": "http.disconnect"}

    response = asyncio.run(server(Request(scope, receive)))
    return response.status_code, json.loads(bytes(response.body)), response.headers


def test_a_post_is_searched_and_answered_as_json() -> None:
    server = _Server()
    body = {"query": "asthma inhaler", "top_k": 4, "sources": ["pubmed", "textbooks"], "return_parents": True}
    status, out, headers = _call(server, "POST", body=json.dumps(body).encode())
    assert status == 200 and headers["content-type"] == "application/json"
    assert out["results"] == {"d1": 1.0} and out["documents"][0]["id"] == "d1"
    assert server.seen == [RetrieveRequest.model_validate(body)]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({}, 422),
        ({"query": "a", "top_k": "many"}, 422),
        ({"query": "a", "top_k": 10**6}, 422),
        ({"query": "a", "mode": "psychic"}, 422),
        ({"query": "a", "colour": "blue"}, 422),  # an unknown field
        ({"query": "a", "sources": ["nejm"]}, 400),
    ],
)
def test_a_bad_body_is_a_4xx_with_its_reason(body: dict[str, Any], status: int) -> None:
    server = _Server()
    code, out, _ = _call(server, "POST", body=json.dumps(body).encode())
    assert code == status and out["detail"], out
    assert not server.seen


def test_other_methods_and_paths_are_refused() -> None:
    code, out, headers = _call(_Server(), "GET")
    assert code == 405 and headers["allow"] == "POST" and out["detail"]
    assert _call(_Server(), "POST", path="/v1/retrieve/extra", body=b'{"query": "a"}')[0] == 404
    assert _call(_Server(), "POST", path="/v1/retrieve/", body=b'{"query": "a"}')[0] == 200
    code, out, _ = _call(_Server(), "POST", body=b'{"query": ')
    assert code == 422 and out["detail"][0]["type"] == "json_invalid"


def test_the_searchers_documents_reach_the_client_unchanged(tmp_path: Path) -> None:
    """One document type end to end: the searcher's ``Doc`` goes through the deployment's search, the JSON
    on the wire and the client, and comes back equal, with the search's scores."""
    pytest.importorskip("faiss")
    from medagent.agent.remote_services import RemoteRetriever
    from medagent.retrieval.search import Searcher
    from tests.unit._retrieval_fakes import build_tiny_index, fake_encode

    notes = [
        {"id": "n1", "title": "Aspirin", "content": "aspirin inhibits platelets in acute coronary syndrome"},
        {"id": "n2", "title": "Insulin", "content": "insulin lowers blood glucose in diabetes"},
    ]
    build_tiny_index(tmp_path, {"notes": notes})
    server = _Server()
    server.searcher = Searcher(tmp_path, query_encoder=fake_encode)
    request = RetrieveRequest(query="aspirin platelets", top_k=2)
    [served] = server._search_group([request], 2, "dense", None, False)
    ranked = server.searcher.search({"q": "aspirin platelets"}, top_k=2)["q"]
    assert served.results == ranked and served.documents == server.searcher.documents(list(ranked), ranked)

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        assert RetrieveRequest.model_validate(body) == request
        return dict(json.loads(served.model_dump_json()))

    docs = asyncio.run(RemoteRetriever(call).retrieve("aspirin platelets", 2))
    assert docs == sorted(served.documents, key=lambda d: -d.score)
    assert [(d.id, d.score) for d in docs] == list(ranked.items())
    assert (docs[0].doc_id, docs[0].title, docs[0].source) == ("n1", "Aspirin", "notes")
