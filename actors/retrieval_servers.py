"""Retriever and reranker Serve deployments: plain classes over the library, made deployments by
``actors.apps``. Requests arriving together are batched with ``@serve.batch``, so one encoder pass and
one FAISS search serve many callers; the blocking work runs in a thread to keep the replica responsive.

``RetrieverHTTPServer`` is also the HTTP ingress of its own application (``POST /v1/retrieve``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict, deque
from typing import Any

from pydantic import ValidationError
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from actors.http_edge import check_body, error_body, refusal_line, validation_error_reply
from actors.metrics import meters
from medagent.api import RerankRequest, RerankResponse, RetrieveRequest, RetrieveResponse
from medagent.config import RerankerConfig, RetrieverConfig, to_dataclass
from medagent.retrieval.rerank import EmbeddingReranker
from medagent.retrieval.search import Searcher

log = logging.getLogger(__name__)


class RetrieverServer:
    """Query encoder + per-source indexes of one index folder.

    ``retrieve`` raises ``ValueError`` for an unknown source (the ingress answers 400).
    """

    def __init__(self, index_dir: str, retriever: dict[str, Any], threads: int | None = None) -> None:
        self.cfg: RetrieverConfig = to_dataclass(RetrieverConfig, retriever)
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.searcher = Searcher(index_dir, use_gpu=self.cfg.use_gpu)
        # Load the encoder and every index now, not on the first user request.
        self.searcher.search({"warmup": "warm up"}, top_k=1, mode=self.cfg.mode)
        self._batched_search.set_max_batch_size(self.cfg.max_batch_size)  # type: ignore[attr-defined]
        self._batched_search.set_batch_wait_timeout_s(self.cfg.batch_wait_timeout_s)  # type: ignore[attr-defined]
        # Seconds each recent request spent inside this replica (batch queue, search, documents): with the
        # caller's own latency it splits Serve's added time into hops and the replica's work.
        self._recent: deque[float] = deque(maxlen=4096)

    async def sources(self) -> list[str]:
        return list(self.searcher.sources)

    async def runtime_info(self) -> dict[str, Any]:
        """What the replica computes with: torch and FAISS threads, niceness, pid (for benchmarks/ops)."""
        import os

        import faiss
        import torch

        return {
            "pid": os.getpid(),
            "nice": os.nice(0),
            "torch_threads": torch.get_num_threads(),
            "faiss_threads": faiss.omp_get_max_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "user_code_thread": os.environ.get("RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD", "1") != "0",
        }

    async def recent_latencies(self, n: int) -> list[float]:
        """Seconds the last ``n`` requests spent inside this replica, oldest first."""
        return list(self._recent)[-n:] if n > 0 else []

    async def retrieve(self, request: dict[str, Any]) -> dict[str, Any]:
        """A ``RetrieveResponse`` as a dict (callers holding a handle)."""
        response: RetrieveResponse = await self._search(RetrieveRequest.model_validate(request))
        return response.model_dump()

    async def _search(self, req: RetrieveRequest) -> RetrieveResponse:
        unknown = sorted(set(req.sources or []) - set(self.searcher.sources))
        if unknown:
            raise ValueError(f"unknown source(s) {unknown}; this index has {self.searcher.sources}")
        start = time.perf_counter()
        response: RetrieveResponse = await self._batched_search(req)
        seconds = time.perf_counter() - start
        meters().retrieval(seconds)
        self._recent.append(seconds)
        return response

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.002)
    async def _batched_search(self, requests: list[RetrieveRequest]) -> list[RetrieveResponse]:
        # Requests with the same search parameters share one encoder pass and one index search.
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            mode = r.mode or self.cfg.mode
            parents = self.cfg.return_parents if r.return_parents is None else r.return_parents
            groups[(r.top_k, mode, tuple(r.sources) if r.sources else None, parents)].append(i)
        out: list[RetrieveResponse | None] = [None for _ in requests]
        for key, idx in groups.items():
            # One thread hop per group: search and document lookup together.
            responses = await asyncio.to_thread(self._search_group, [requests[i] for i in idx], *key)
            for i, response in zip(idx, responses, strict=True):
                out[i] = response
        return [r for r in out if r is not None]

    def _search_group(
        self,
        requests: list[RetrieveRequest],
        top_k: int,
        mode: str,
        sources: tuple[str, ...] | None,
        parents: bool,
    ) -> list[RetrieveResponse]:
        results = self.searcher.search(
            {str(i): r.query for i, r in enumerate(requests)}, top_k, sources, mode, parents
        )
        responses = []
        for i, r in enumerate(requests):
            ranked = results[str(i)]
            docs = self.searcher.documents(list(ranked), ranked)
            responses.append(RetrieveResponse(query_id=r.query_id, results=ranked, documents=docs))
        return responses


class RetrieverHTTPServer(RetrieverServer):
    """``RetrieverServer`` that answers ``POST /v1/retrieve`` itself, as its application's ingress.

    A plain Starlette handler, not FastAPI: measured on 2 cores, FastAPI's request handling in the replica
    cost as much as the whole ingress hop it replaces. It keeps the API contract of the other routes:
    a body that is not JSON, too large, not UTF-8 or nested too deep -> 415/413/400 (``actors.http_edge``,
    checked before parsing), a malformed body -> 422 naming the fields (the input never echoed), an unknown
    source -> 400, another method -> 405; each refusal one log line.
    """

    async def __call__(self, request: Request) -> Response:
        path, root = request.scope["path"], request.scope.get("root_path", "")
        if path.removeprefix(root) not in ("", "/"):  # the route prefix is the whole route
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if request.method != "POST":
            return JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers={"Allow": "POST"})
        refusal, body = await check_body(request.scope, request.receive)
        if refusal is not None:
            refusal_line("POST", path, *refusal)
            return Response(
                error_body(refusal[1]),
                status_code=refusal[0],
                media_type="application/json",
                headers=_NOSNIFF,
            )
        try:
            req = RetrieveRequest.model_validate_json(body)
        except ValidationError as exc:
            status, reply = validation_error_reply("POST", path, exc)
            return Response(reply, status_code=status, media_type="application/json", headers=_NOSNIFF)
        try:
            response = await self._search(req)
        except ValueError as exc:  # unknown source: the caller's mistake, not the replica's
            refusal_line("POST", path, 400, str(exc))
            return JSONResponse({"detail": str(exc)[:500]}, status_code=400, headers=_NOSNIFF)
        # Serialised once, here: the proxy passes the bytes through.
        return Response(response.model_dump_json(), media_type="application/json", headers=_NOSNIFF)


_NOSNIFF = {"X-Content-Type-Options": "nosniff"}


class RerankerServer:
    """An embedding reranker; several requests are scored in one forward pass."""

    def __init__(self, reranker: dict[str, Any]) -> None:
        self.cfg: RerankerConfig = to_dataclass(RerankerConfig, reranker)
        self.reranker = EmbeddingReranker(self.cfg)

    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        req = RerankRequest.model_validate(request)
        return await self._batched_rerank(req)  # type: ignore[no-any-return]

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.002)
    async def _batched_rerank(self, requests: list[RerankRequest]) -> list[dict[str, Any]]:
        by_top_r: dict[int, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            by_top_r[r.top_r or self.cfg.top_r].append(i)
        out: list[dict[str, Any]] = [{} for _ in requests]
        for top_r, idx in by_top_r.items():
            pairs = [(requests[i].query, requests[i].candidates) for i in idx]
            scored = await asyncio.to_thread(self.reranker.rerank_many, pairs, top_r)
            for i, results in zip(idx, scored, strict=True):
                out[i] = RerankResponse(results=results).model_dump()
        return out
