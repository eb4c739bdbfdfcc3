"""``Retriever`` and ``Reranker`` over the serving API, whatever carries the request.

Both speak the wire models of ``medagent.api``: each request is built as its model (``RetrieveRequest``,
``RerankRequest``) and each response is parsed with its model (``RetrieveResponse``, ``RerankResponse``),
so a change of the contract on the server's side fails here, by name, instead of as a missing key deep in
an agent. They take an async ``call(request_dict) -> response_dict``, which is a Serve deployment handle
method inside the cluster (``actors.common.services_for``) or an HTTP POST to a running application
(``http_call``). Building the request and reading the response live here once, so the two transports
cannot drift apart; tests pass a plain coroutine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from medagent.api import (
    MAX_CANDIDATE_CHARS,
    MAX_CANDIDATES,
    MAX_QUERY_CHARS,
    Doc,
    RerankCandidate,
    RerankRequest,
    RerankResponse,
    RetrieveRequest,
    RetrieveResponse,
)
from medagent.llm.base import LLMError
from medagent.llm.retry import with_retries

Call = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Response = TypeVar("Response", bound=BaseModel)


class ServiceError(LLMError):
    """A retrieval or rerank endpoint failed after its retries.

    A subclass of ``LLMError`` on purpose: to the agent worker any failed endpoint means the same thing
    (record it against the question, keep the batch going), while a bug in our code still propagates.
    """


class MalformedResponse(ServiceError):
    """An endpoint answered with a body its wire model rejects: the server speaks another contract.

    Not retried (the same replica would answer the same way). A ``ServiceError``, so the worker records it
    against the question like any failed endpoint; the message names the model and the fields at fault.
    """


class _Remote:
    def __init__(self, call: Call, *, what: str, max_retries: int = 3, backoff_s: float = 1.0) -> None:
        self._call = call
        self.what = what
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    async def _request(self, request: BaseModel, response_model: type[Response]) -> Response:
        """Sends ``request`` and parses the answer as ``response_model``.

        Bounded retries of transport failures: a replica that died is being replaced by Serve meanwhile.
        A refusal (``ValueError``: an unknown source...) or any other exception propagates at once.

        Raises:
            MalformedResponse: The answer does not validate as ``response_model``.
        """
        # Only the fields the caller set go on the wire: the server's defaults stay the server's.
        body = request.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        raw = await with_retries(
            lambda: self._call(body),
            what=self.what,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            error=ServiceError,
        )
        try:
            return response_model.model_validate(raw)
        except ValidationError as exc:
            raise MalformedResponse(
                f"{self.what}: the endpoint's answer is not a {response_model.__name__}: {exc}"
            ) from exc


class RemoteRetriever(_Remote):
    """``Retriever`` over ``/v1/retrieve`` (or the Retriever deployment's ``retrieve`` method)."""

    def __init__(self, call: Call, **kwargs: Any) -> None:
        super().__init__(call, what="retrieval", **kwargs)

    async def retrieve(
        self,
        query: str,
        top_k: int,
        *,
        sources: list[str] | None = None,
        mode: str | None = None,
        return_parents: bool | None = None,
    ) -> list[Doc]:
        request = RetrieveRequest.model_validate(
            {
                "query": query[:MAX_QUERY_CHARS],
                "top_k": top_k,
                "sources": sources or None,
                "mode": mode or None,
                "return_parents": return_parents,
            }
        )
        response = await self._request(request, RetrieveResponse)
        return sorted(response.documents, key=lambda d: -d.score)


def candidate_text(doc: Doc) -> str:
    """What the reranker reads of a document: its title and text, cut to the API's limit."""
    text = f"{doc.title}\n{doc.content}" if doc.title else doc.content
    return text[:MAX_CANDIDATE_CHARS]


class RemoteReranker(_Remote):
    """``Reranker`` over ``/v1/rerank`` (or the Reranker deployment's ``rerank`` method)."""

    def __init__(self, call: Call, **kwargs: Any) -> None:
        super().__init__(call, what="rerank", **kwargs)

    async def rerank(self, query: str, docs: list[Doc], top_r: int) -> list[Doc]:
        if not docs or top_r <= 0:
            return []
        # At most MAX_CANDIDATES per request (the API's bound on one request's cost): more candidates go
        # in several requests; a candidate's score does not depend on the others, so the merge is exact.
        scored: list[tuple[float, int]] = []
        for start in range(0, len(docs), MAX_CANDIDATES):
            part = docs[start : start + MAX_CANDIDATES]
            # Positions, not document ids, name the candidates: ids need only be unique per source.
            request = RerankRequest(
                query=query[:MAX_QUERY_CHARS],
                candidates=[RerankCandidate(id=str(i), text=candidate_text(d)) for i, d in enumerate(part)],
                top_r=min(top_r, len(part)),
            )
            response = await self._request(request, RerankResponse)
            scored += [(s, start + _position(k, len(part), self.what)) for k, s in response.results.items()]
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [replace(docs[i], score=s) for s, i in scored[:top_r]]


def _position(key: str, n: int, what: str) -> int:
    """The candidate a rerank result names: its position in the request."""
    if key.isdigit() and int(key) < n:
        return int(key)
    raise MalformedResponse(f"{what}: the endpoint scored candidate {key!r}, not one of 0..{n - 1}")


def http_call(base_url: str, route: str, *, timeout_s: float = 120.0) -> Call:
    """An async POST to ``base_url + route`` returning the JSON body; 4xx raises ``ValueError``."""
    import httpx

    url = base_url.rstrip("/") + route
    client: httpx.AsyncClient | None = None

    async def call(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal client
        if client is None:  # created lazily, inside the event loop that uses it
            client = httpx.AsyncClient(timeout=timeout_s)
        r = await client.post(url, json=body)
        if 400 <= r.status_code < 500:
            raise ValueError(f"{url} refused the request ({r.status_code}): {r.text[:300]}")
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result

    return call
