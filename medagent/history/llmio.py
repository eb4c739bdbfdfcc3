"""The history-taking model calls' JSON request (over ``medagent.llm.structured``) and their usage log.

A reply that is not a JSON object of the expected shape is *malformed*: the error is recorded, shown to the
model (``history_retry`` prompt) and the request retried ``max_retries`` times; after that the caller gets
``None`` and handles it (keeps the state, falls back to a plain question...). An endpoint failure
(``LLMError``) is not a model mistake and propagates: the worker records it against the interview.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from medagent.llm.base import ChatModel, Usage
from medagent.llm.structured import MalformedReply, ask_with, first_object

T = TypeVar("T")


def json_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI ``response_format`` for a strict JSON schema."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def obj_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


def require_str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise MalformedReply(f"{key!r} must be a string")
    return value


def require_list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise MalformedReply(f"{key!r} must be a list")
    return value


def call_kind(tag: str) -> str:
    """The kind of call a tag names: ``turn 3 question (onset)`` -> ``question``."""
    return re.sub(r" \(.*\)$", "", re.sub(r"^turn \d+ ", "", tag)) or "other"


@dataclass
class CallLog:
    """What the model calls of one interview cost, and what went wrong (for the turn log)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    # The same figures per kind of call ("state update", "question", "patient"...): where an interview's
    # time goes is the first thing to read when a run is slow.
    by_tag: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, usage: Usage, latency_s: float, tag: str = "other") -> None:
        self.calls += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.latency_s += latency_s
        t = self.by_tag.setdefault(
            call_kind(tag), {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0}
        )
        t["calls"] += 1
        t["prompt_tokens"] += usage.prompt_tokens
        t["completion_tokens"] += usage.completion_tokens
        t["latency_s"] = round(t["latency_s"] + latency_s, 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 3),
            "by_tag": {k: dict(v) for k, v in sorted(self.by_tag.items())},
        }


async def ask_json(
    llm: ChatModel,
    messages: list[dict[str, Any]],
    parse: Callable[[dict[str, Any]], T],
    *,
    prompt: str,
    tag: str,
    log: CallLog,
    response_format: dict[str, Any] | None,
    max_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_retries: int = 1,
) -> tuple[T | None, list[str]]:
    """Sends ``messages``, parses the first JSON object of the reply with ``parse``; retries when malformed
    (``medagent.llm.structured.ask_with``, the one retry loop).

    Returns:
        The parsed value (None when every attempt was malformed) and the errors met (also in ``log``).

    Raises:
        LLMError: The endpoint failed.
    """

    def read(text: str) -> T:
        obj = first_object(text)
        if obj is None:
            raise MalformedReply(f"no JSON object in the reply: {text[:120]!r}")
        return parse(dict(obj))

    reply = await ask_with(
        llm,
        messages,
        read,
        prompt=prompt,
        fmt=response_format,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        max_retries=max_retries,
        tag=tag,
        on_response=lambda resp: log.add(resp.usage, resp.latency_s, tag),
    )
    log.errors.extend(reply.errors)
    return reply.value, reply.errors
