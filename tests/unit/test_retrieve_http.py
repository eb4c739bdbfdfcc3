"""``RetrieverHTTPServer.__call__``, the retrieval application's HTTP contract, without Ray: the index
search is replaced, the request is a real Starlette one built from an ASGI scope."""

from __future__ import annotations

import asyncio
import json
from collections import deque
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
