"""A ``ChatModel`` over a Ray Serve deployment handle: the in-cluster path, with no HTTP hop.

It only needs an object whose ``chat.remote(body)`` is awaitable and yields an OpenAI response dict,
so it imports nothing from Ray and is unit-tested with a fake handle.
"""

from __future__ import annotations

from typing import Any

from medagent.llm.base import CompletionChatModel
from medagent.llm.retry import with_retries


class DeploymentHandleChatModel(CompletionChatModel):
    """Calls ``handle.chat.remote(body)`` with bounded retries on replica failures.

    Args:
        handle: A Serve ``DeploymentHandle`` (or any object with the same ``chat.remote`` shape).
        model: Served model name put in each request.
        max_retries: Retries when the call raises (replica died, is restarting, or timed out).
        backoff_s: First back-off delay; doubles each retry.
    """

    def __init__(self, handle: Any, model: str, *, max_retries: int = 3, backoff_s: float = 1.0) -> None:
        self.handle = handle
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            result: dict[str, Any] = await self.handle.chat.remote(body)
            return result

        # A replica that died or is restarting is retried (Serve replaces it meanwhile); an exception raised
        # inside the replica's code comes back as RayTaskError and is not.
        return await with_retries(
            call, what="LLM deployment", max_retries=self.max_retries, backoff_s=self.backoff_s
        )
