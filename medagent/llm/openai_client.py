"""Async client for any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works against vLLM, ``ray.serve.llm``, our CPU llama.cpp deployment and hosted APIs alike. The transport
is aiohttp: with 64 questions in flight httpx's connection pool doubled the mean latency of a 100 ms
endpoint (encode/httpx#3215; ``benchmarks/bench_agent.py`` measures it), aiohttp did not.
"""

from __future__ import annotations

import json
import os
from typing import Any

import aiohttp

from medagent.llm.base import CompletionChatModel, LLMError
from medagent.llm.retry import with_retries

# Status codes worth retrying: the replica is restarting, overloaded or timed out.
_RETRYABLE = {408, 429, 500, 502, 503, 504}


class _Retryable(ConnectionError):
    """A retryable HTTP status, as the transport failure it is (``medagent.llm.retry.is_transient``)."""


class OpenAIChatClient(CompletionChatModel):
    """Sends chat requests over HTTP with bounded retries and exponential back-off.

    Args:
        base_url: Endpoint root including ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``).
        model: Model name sent in each request.
        api_key_env: Name of the environment variable holding the API key (never the key itself, so
            configs can be logged safely). Missing variable means no auth header.
        timeout_s: Per-request timeout.
        max_retries: Retries on connection errors and retryable status codes.
        backoff_s: First back-off delay; doubles each retry.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        headers = {}
        key = os.environ.get(api_key_env) if api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, connect=10.0)
        self._headers = headers
        self._client: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        # Created lazily, inside the event loop that uses it, so the client can be constructed outside
        # one and pickled into actors. limit=0: concurrency is bounded by the agents, not by the pool.
        if self._client is None or self._client.closed:
            self._client = aiohttp.ClientSession(
                timeout=self._timeout, headers=self._headers, connector=aiohttp.TCPConnector(limit=0)
            )
        return self._client

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POSTs a raw request body and returns the decoded JSON response."""
        url = f"{self.base_url}/chat/completions"

        async def call() -> dict[str, Any]:
            async with self._http().post(url, json=body) as resp:
                status, text = resp.status, await resp.text()
            if status in _RETRYABLE:
                raise _Retryable(f"HTTP {status} from {url}: {text[:300]}")
            if status >= 400:
                raise LLMError(f"HTTP {status} from {url}: {text[:300]}")
            try:
                data: dict[str, Any] = json.loads(text)
            except ValueError as exc:
                raise LLMError(f"non-JSON response from {url}: {text[:200]}") from exc
            return data

        return await with_retries(call, what=url, max_retries=self.max_retries, backoff_s=self.backoff_s)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
