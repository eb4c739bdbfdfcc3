"""Async client for any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works against vLLM, ``ray.serve.llm``, our CPU llama.cpp deployment and hosted APIs alike.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx

from medagent.llm.base import CompletionChatModel, LLMError

# Status codes worth retrying: the replica is restarting, overloaded or timed out.
_RETRYABLE = {408, 429, 500, 502, 503, 504}


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
        self._timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._headers = headers
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        # Created lazily so the client can be constructed outside an event loop and pickled into actors.
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
        return self._client

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """POSTs a raw request body and returns the decoded JSON response."""
        url = f"{self.base_url}/chat/completions"
        delay = self.backoff_s
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                resp = await self._http().post(url, json=body)
            except httpx.HTTPError as exc:
                last = exc
            else:
                if resp.status_code < 400:
                    try:
                        data: dict[str, Any] = resp.json()
                    except ValueError as exc:
                        raise LLMError(f"non-JSON response from {url}: {resp.text[:200]}") from exc
                    return data
                last = LLMError(f"HTTP {resp.status_code} from {url}: {resp.text[:300]}")
                if resp.status_code not in _RETRYABLE:
                    raise last
            if attempt < self.max_retries:
                await asyncio.sleep(delay)
                delay *= 2
        raise LLMError(f"{url} failed after {self.max_retries + 1} attempts: {last}") from last

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
