"""Scripted fakes for unit tests (never used outside tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from medagent.llm.base import CompletionChatModel


def completion(
    content: str = "", tool_calls: list[dict[str, Any]] | None = None, **usage: int
) -> dict[str, Any]:
    """An OpenAI chat-completion response dict."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": usage.get("prompt_tokens", 10),
            "completion_tokens": usage.get("completion_tokens", 2),
        },
    }


class ScriptedChatModel(CompletionChatModel):
    """Replies from a script (a list consumed in order, or a function of the request body).

    Every request body is recorded in ``requests`` so tests can assert on what the agent sent. The body
    a script sees and ``requests`` keeps carries the prompt's name under ``"prompt"`` (a real client keeps
    it off the wire), so fakes route on the prompt, not on its wording.
    """

    def __init__(
        self, script: list[dict[str, Any] | Exception] | Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        self.model = "fake"
        self.script = script
        self.requests: list[dict[str, Any]] = []

    async def send(self, body: dict[str, Any], prompt: str) -> dict[str, Any]:
        return await self.complete({**body, "prompt": prompt} if prompt else body)

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        if callable(self.script):
            return self.script(body)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


class ScriptedEngine:
    """An engine for ``actors.llm_deployment.LlamaCppServer`` (``engine_factory``): every request gets
    ``{"answer": <letter>}`` with token logprobs, so the real Serve and Ray Data wiring runs without a
    model. The letter is the first option letter named in the last message, else "A"."""

    def __init__(self, cfg: Any = None) -> None:
        self.requests = 0

    def complete_sync(self, body: dict[str, Any]) -> dict[str, Any]:
        import math
        import re

        self.requests += 1
        found = re.search(r"\(([A-E])\)", str(body["messages"][-1].get("content", "")))
        letter = found.group(1) if found else "A"
        out = completion(f'{{"answer": "{letter}"}}')
        if body.get("logprobs"):
            pieces = ['{"answer": "', letter, '"}']
            out["choices"][0]["logprobs"] = {
                "content": [
                    {"token": p, "logprob": math.log(0.8) if p == letter else 0.0,
                     "top_logprobs": [{"token": "B" if letter != "B" else "C", "logprob": math.log(0.2)}]
                     if p == letter else []}
                    for p in pieces
                ]
            }  # fmt: skip
        return out
