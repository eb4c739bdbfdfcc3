"""The chat-model contract every backend speaks: OpenAI ``/v1/chat/completions`` request and response.

Backends (vLLM through ``ray.serve.llm``, the CPU llama.cpp deployment, any external endpoint, a
Serve deployment handle, a scripted fake in tests) all take an OpenAI-style request dict and return an
OpenAI-style completion dict; ``parse_chat_completion`` turns that into a typed ``ChatResponse`` in one
place so tool-call and usage handling never forks per backend.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, runtime_checkable


class LLMError(RuntimeError):
    """The model endpoint failed (transport error, timeout, 5xx, malformed response envelope).

    Agents record it against the question (error column) instead of crashing the batch; a bug in our own
    code is a different exception type and propagates.
    """


@dataclass(frozen=True)
class ToolCall:
    """A function call requested by the model."""

    name: str
    arguments: dict[str, Any]
    id: str = ""
    # Where the call was found: "native" (tool_calls field) or "text" (parsed out of the content).
    origin: str = "native"


@dataclass(frozen=True)
class Usage:
    """Token counts and engine timings of one call; a figure the backend does not report is None, not 0.

    Attributes:
        prompt_tokens: Prompt tokens sent.
        completion_tokens: Tokens decoded.
        cached_tokens: Prompt tokens served from the engine's prefix cache (llama.cpp ``timings.cache_n``,
            OpenAI/vLLM ``usage.prompt_tokens_details.cached_tokens``).
        evaluated_tokens: Prompt tokens the engine computed (llama.cpp ``timings.prompt_n``; else sent minus
            cached where cached is reported).
        prompt_ms: Engine time reading the prompt (llama.cpp ``timings.prompt_ms``).
        decode_ms: Engine time decoding (llama.cpp ``timings.predicted_ms``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    evaluated_tokens: int | None = None
    prompt_ms: float | None = None
    decode_ms: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the backend's most likely alternatives.

    Attributes:
        token: The token's text.
        logprob: Its natural-log probability.
        top: ``(text, logprob)`` of the ``top_logprobs`` most likely tokens at this position (llama.cpp and
            vLLM report them from the model's distribution before grammar constraints are applied).
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ChatResponse:
    """One assistant turn.

    Attributes:
        content: Text content ('' when the model only called tools).
        tool_calls: Native tool calls (text-embedded calls are parsed later by the agent's parser).
        usage: Token counts reported by the backend.
        finish_reason: ``stop``, ``length``, ``tool_calls``... as reported.
        latency_s: Wall time of the request as measured by the caller.
        model: Model name the backend reported.
        prompt: Name of the prompt the request was rendered from (``ChatModel.chat(prompt=...)``); usage is
            counted by it.
        logprobs: Per-token log-probabilities of ``content`` when they were asked for (``top_logprobs``)
            and the backend returned them; empty otherwise.
    """

    content: str
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    latency_s: float = 0.0
    model: str = ""
    logprobs: tuple[TokenLogprob, ...] = field(default_factory=tuple)
    prompt: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers an OpenAI-style chat request asynchronously.

    ``prompt`` names the prompt the request was rendered from: it travels with the request (usage by
    prompt, test fakes route on it) and is never sent to the endpoint.
    """

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_tokens: int = 512,
        seed: int | None = None,
        top_logprobs: int | None = None,
        prompt: str | None = None,
    ) -> ChatResponse: ...


def build_request(
    model: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
    response_format: dict[str, Any] | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_tokens: int = 512,
    seed: int | None = None,
    top_logprobs: int | None = None,
) -> dict[str, Any]:
    """Builds the OpenAI request body shared by every backend.

    ``tool_choice`` goes out only with ``tools``: ``"required"`` makes vLLM decode the reply under the
    tools' schemas (guided decoding), so even a small model returns real ``tool_calls``; ``"auto"`` leaves
    the choice to the model and the server's tool-call parser. ``top_logprobs`` asks for per-token
    log-probabilities (OpenAI ``logprobs``/``top_logprobs``, which llama.cpp's server and vLLM honour).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
    }
    if tools:
        body["tools"] = tools
        if tool_choice:
            body["tool_choice"] = tool_choice
    if response_format:
        body["response_format"] = response_format
    if seed is not None:
        body["seed"] = seed
    if top_logprobs is not None:
        body["logprobs"] = True
        body["top_logprobs"] = top_logprobs
    return body


def _parse_logprobs(choice: dict[str, Any]) -> tuple[TokenLogprob, ...]:
    """``choices[0].logprobs.content`` as typed tokens; a missing or odd block is no logprobs, not an error
    (the caller falls back to another confidence)."""
    block = choice.get("logprobs")
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list):
        return ()
    out = []
    for t in content:
        if not isinstance(t, dict) or not isinstance(t.get("logprob"), (int, float)):
            return ()
        top = tuple(
            (str(a.get("token", "")), float(a["logprob"]))
            for a in t.get("top_logprobs") or []
            if isinstance(a, dict) and isinstance(a.get("logprob"), (int, float))
        )
        out.append(TokenLogprob(str(t.get("token", "")), float(t["logprob"]), top))
    return tuple(out)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_usage(payload: dict[str, Any]) -> Usage:
    """``usage`` (and llama.cpp's ``timings``) of a completion; what the backend leaves out stays None."""
    usage: dict[str, Any] = payload.get("usage") or {}
    timings: dict[str, Any] = payload.get("timings") or {}
    details = usage.get("prompt_tokens_details")
    sent = int(usage.get("prompt_tokens") or 0)
    cached = _int(timings.get("cache_n"))
    if cached is None and isinstance(details, dict):
        cached = _int(details.get("cached_tokens"))
    evaluated = _int(timings.get("prompt_n"))
    if evaluated is None and cached is not None:
        evaluated = max(sent - cached, 0)
    return Usage(
        prompt_tokens=sent,
        completion_tokens=int(usage.get("completion_tokens") or 0),
        cached_tokens=cached,
        evaluated_tokens=evaluated,
        prompt_ms=_float(timings.get("prompt_ms")),
        decode_ms=_float(timings.get("predicted_ms")),
    )


def parse_chat_completion(payload: dict[str, Any], latency_s: float = 0.0) -> ChatResponse:
    """Parses an OpenAI chat-completion response dict.

    Raises:
        LLMError: The payload is an error object or lacks ``choices[0].message``.
    """
    if not isinstance(payload, dict):
        raise LLMError(f"chat completion is not a JSON object: {str(payload)[:200]}")
    if "error" in payload and "choices" not in payload:
        raise LLMError(f"backend error: {str(payload['error'])[:500]}")
    try:
        choice = payload["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"malformed chat completion (no choices[0].message): {str(payload)[:300]}") from exc
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or []:
        fn = raw.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                parsed = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                # Keep the malformed text so the agent can report it back to the model as an observation.
                parsed = {"__malformed__": args}
        else:
            parsed = args or {}
        calls.append(ToolCall(name=str(fn.get("name", "")), arguments=parsed, id=str(raw.get("id", ""))))
    return ChatResponse(
        content=message.get("content") or "",
        tool_calls=tuple(calls),
        usage=parse_usage(payload),
        finish_reason=str(choice.get("finish_reason") or ""),
        latency_s=latency_s,
        model=str(payload.get("model", "")),
        logprobs=_parse_logprobs(choice),
    )


class CompletionChatModel:
    """Base for backends that send a raw OpenAI request body: subclasses implement ``complete``.

    Request building and response parsing live here once, so every backend behaves the same.
    """

    model: str

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_tokens: int = 512,
        seed: int | None = None,
        top_logprobs: int | None = None,
        prompt: str | None = None,
    ) -> ChatResponse:
        body = build_request(
            self.model,
            messages,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            top_logprobs=top_logprobs,
        )
        start = time.perf_counter()
        payload = await self.send(body, prompt or "")
        resp = parse_chat_completion(payload, latency_s=time.perf_counter() - start)
        return replace(resp, prompt=prompt or "")

    async def send(self, body: dict[str, Any], prompt: str) -> dict[str, Any]:
        """Sends ``body``; the prompt's name stays on this side of the wire (a scripted fake reads it)."""
        return await self.complete(body)
