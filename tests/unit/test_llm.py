import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from medagent.llm.base import LLMError, parse_chat_completion
from medagent.llm.handle import DeploymentHandleChatModel
from medagent.llm.openai_client import OpenAIChatClient
from tests.fakes import completion


def test_parse_native_tool_calls_and_usage() -> None:
    payload = completion(
        "",
        tool_calls=[
            {"id": "c1", "function": {"name": "enable_search", "arguments": json.dumps({"query": "x"})}},
            {"id": "c2", "function": {"name": "locate_evidence", "arguments": "{not json"}},
        ],
        prompt_tokens=7,
        completion_tokens=3,
    )
    resp = parse_chat_completion(payload, latency_s=0.5)
    assert [c.name for c in resp.tool_calls] == ["enable_search", "locate_evidence"]
    assert resp.tool_calls[0].arguments == {"query": "x"}
    assert resp.tool_calls[1].arguments == {"__malformed__": "{not json"}  # kept for the agent to report
    assert resp.usage.total_tokens == 10
    assert resp.latency_s == 0.5
    # No cache or timing figures in the payload: uncounted, not zero.
    assert resp.usage.cached_tokens is None and resp.usage.evaluated_tokens is None
    assert resp.usage.prompt_ms is None and resp.usage.decode_ms is None


def test_parse_llamacpp_timings_and_openai_cached_tokens() -> None:
    llamacpp = completion("ok", prompt_tokens=172, completion_tokens=8)
    llamacpp["usage"]["prompt_tokens_details"] = {"cached_tokens": 159}
    llamacpp["timings"] = {
        "cache_n": 159,
        "prompt_n": 13,
        "prompt_ms": 46.7,
        "predicted_n": 8,
        "predicted_ms": 57.2,
    }
    u = parse_chat_completion(llamacpp).usage
    assert (u.prompt_tokens, u.cached_tokens, u.evaluated_tokens, u.completion_tokens) == (172, 159, 13, 8)
    assert (u.prompt_ms, u.decode_ms) == (46.7, 57.2)
    vllm = completion("ok", prompt_tokens=100, completion_tokens=4)
    vllm["usage"]["prompt_tokens_details"] = {"cached_tokens": 64}
    u = parse_chat_completion(vllm).usage
    assert (u.cached_tokens, u.evaluated_tokens, u.prompt_ms, u.decode_ms) == (64, 36, None, None)


def test_the_response_carries_its_prompt_name() -> None:
    handle = DeploymentHandleChatModel(_FakeHandle([completion("ok")]), "m")
    resp = asyncio.run(handle.chat([{"role": "user", "content": "q"}], prompt="perform_comparison"))
    assert resp.prompt == "perform_comparison"


@pytest.mark.parametrize("payload", [{"error": {"message": "boom"}}, {"choices": []}, {"foo": 1}, ["x"]])
def test_parse_rejects_malformed_envelopes(payload: object) -> None:
    with pytest.raises(LLMError):
        parse_chat_completion(payload)  # type: ignore[arg-type]


def _with_server(handler: Callable[[dict[str, Any]], web.Response], go: Callable[[OpenAIChatClient], Any],
                 **kw: Any) -> Any:  # fmt: skip
    """Runs ``go(client)`` against a loopback aiohttp server whose replies come from ``handler(body)``."""
    from aiohttp.test_utils import TestServer

    async def main() -> Any:
        async def endpoint(request: web.Request) -> web.Response:
            return handler(await request.json())

        app = web.Application()
        app.router.add_post("/v1/chat/completions", endpoint)
        async with TestServer(app, host="127.0.0.1") as server:
            client = OpenAIChatClient(str(server.make_url("/v1")), "m", backoff_s=0.0, **kw)
            try:
                return await go(client)
            finally:
                await client.aclose()

    return asyncio.run(main())


def test_openai_client_retries_5xx_then_succeeds() -> None:
    calls: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> web.Response:
        calls.append(body)
        if len(calls) < 3:
            return web.Response(status=503, text="restarting")
        return web.json_response(completion("B"))

    resp = _with_server(
        handler,
        lambda c: c.chat([{"role": "user", "content": "q"}], max_tokens=5, temperature=0.0),
        max_retries=3,
    )
    assert resp.content == "B"
    assert len(calls) == 3
    assert calls[0]["model"] == "m" and calls[0]["max_tokens"] == 5


def test_openai_client_does_not_retry_4xx() -> None:
    calls = []

    def handler(body: dict[str, Any]) -> web.Response:
        calls.append(1)
        return web.Response(status=400, text="bad request")

    with pytest.raises(LLMError, match="HTTP 400"):
        _with_server(handler, lambda c: c.chat([{"role": "user", "content": "q"}]), max_retries=3)
    assert len(calls) == 1


def test_openai_client_gives_up_after_retries() -> None:
    # Nothing listens on port 9 of loopback: every attempt is refused.
    async def go() -> None:
        client = OpenAIChatClient("http://127.0.0.1:9/v1", "m", backoff_s=0.0, max_retries=2)
        try:
            await client.chat([{"role": "user", "content": "q"}])
        finally:
            await client.aclose()

    with pytest.raises(LLMError, match="3 attempts"):
        asyncio.run(go())


class _FakeMethod:
    def __init__(self, outcomes: list[object]) -> None:
        self.outcomes = outcomes
        self.bodies: list[dict] = []

    def remote(self, body: dict) -> object:
        self.bodies.append(body)
        outcome = self.outcomes.pop(0)

        async def run() -> object:
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        return run()


class _FakeHandle:
    def __init__(self, outcomes: list[object]) -> None:
        self.chat = _FakeMethod(outcomes)


def test_handle_model_retries_replica_failure() -> None:
    handle = _FakeHandle([ConnectionError("replica died"), completion("A")])
    llm = DeploymentHandleChatModel(handle, "served", backoff_s=0.0)
    resp = asyncio.run(llm.chat([{"role": "user", "content": "q"}]))
    assert resp.content == "A"
    assert handle.chat.bodies[-1]["model"] == "served"


def test_handle_model_engine_refusal_is_llm_error() -> None:
    handle = _FakeHandle([{"error": {"message": "Expected 'messages' to be an array", "code": 400}}])
    llm = DeploymentHandleChatModel(handle, "served", backoff_s=0.0)
    with pytest.raises(LLMError, match="backend error"):
        asyncio.run(llm.chat([{"role": "user", "content": "q"}]))


def test_a_bug_is_not_retried() -> None:
    # A TypeError (our code, or code inside the replica) propagates at once instead of being retried.
    handle = _FakeHandle([TypeError("bad argument"), completion("A")])
    llm = DeploymentHandleChatModel(handle, "served", backoff_s=0.0)
    with pytest.raises(TypeError, match="bad argument"):
        asyncio.run(llm.chat([{"role": "user", "content": "q"}]))
    assert len(handle.chat.bodies) == 1


def test_transient_failures_are_those_of_transport_and_cluster() -> None:
    from medagent.llm.retry import is_transient

    ray_like = type("ActorDiedError", (Exception,), {"__module__": "ray.exceptions"})
    task_error = type("RayTaskError(TypeError)", (TypeError,), {"__module__": "ray.exceptions"})
    assert is_transient(TimeoutError()) and is_transient(ConnectionError()) and is_transient(ray_like())
    assert not is_transient(task_error()) and not is_transient(ValueError()) and not is_transient(KeyError())
