"""``Retriever`` and ``Reranker`` over the serving API, whatever carries the request.

Both speak the wire models of ``medagent.api``: they take an async ``call(request_dict) -> response_dict``,
which is a Serve deployment handle method inside the cluster (``actors.common.services_for``) or an HTTP
POST to a running application (``http_call``). Building the request and reading the response live here
once, so the two transports cannot drift apart; tests pass a plain coroutine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from medagent.agent.services import Doc
from medagent.api import MAX_CANDIDATE_CHARS, MAX_CANDIDATES, MAX_QUERY_CHARS
from medagent.llm.base import LLMError
from medagent.llm.retry import with_retries

Call = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ServiceError(LLMError):
    """A retrieval or rerank endpoint failed after its retries.

    A subclass of ``LLMError`` on purpose: to the agent worker any failed endpoint means the same thing
    (record it against the question, keep the batch going), while a bug in our code still propagates.
    """


class _Remote:
    def __init__(self, call: Call, *, what: str, max_retries: int = 3, backoff_s: float = 1.0) -> None:
        self._call = call
        self.what = what
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    async def _request(self, body: dict[str, Any]) -> dict[str, Any]:
        """Bounded retries of transport failures: a replica that died is being replaced by Serve meanwhile.

        A refusal (``ValueError``: an unknown source...) or any other exception propagates at once.
        """
        return await with_retries(
            lambda: self._call(body),
            what=self.what,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            error=ServiceError,
        )


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
        body: dict[str, Any] = {"query": query[:MAX_QUERY_CHARS], "top_k": top_k}
        if sources:
            body["sources"] = sources
        if mode:
            body["mode"] = mode
        if return_parents is not None:
            body["return_parents"] = return_parents
        response = await self._request(body)
        docs = [Doc.from_dict(d) for d in response.get("documents", [])]
        return sorted(docs, key=lambda d: -d.score)


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
        # Positions, not document ids, name the candidates: ids need only be unique per source.
        docs = docs[:MAX_CANDIDATES]
        body = {
            "query": query[:MAX_QUERY_CHARS],
            "candidates": [{"id": str(i), "text": candidate_text(d)} for i, d in enumerate(docs)],
            "top_r": min(top_r, len(docs)),
        }
        response = await self._request(body)
        scores: dict[str, float] = response.get("results", {})
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        out = []
        for key, score in ranked[:top_r]:
            d = docs[int(key)]
            out.append(Doc(d.id, d.source, d.title, d.content, float(score), d.doc_id, d.parent_id))
        return out


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
