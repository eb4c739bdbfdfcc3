import asyncio
import json

import httpx
import pytest

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


@pytest.mark.parametrize("payload", [{"error": {"message": "boom"}}, {"choices": []}, {"foo": 1}, ["x"]])
def test_parse_rejects_malformed_envelopes(payload: object) -> None:
    with pytest.raises(LLMError):
        parse_chat_completion(payload)  # type: ignore[arg-type]


def _client_with(handler: object, **kw: object) -> OpenAIChatClient:
    client = OpenAIChatClient("http://llm.test/v1", "m", backoff_s=0.0, **kw)  # type: ignore[arg-type]
    client._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))  # type: ignore[arg-type]
    return client


def test_openai_client_retries_5xx_then_succeeds() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if len(calls) < 3:
            return httpx.Response(503, text="restarting")
        return httpx.Response(200, json=completion("B"))

    client = _client_with(handler, max_retries=3)
    resp = asyncio.run(client.chat([{"role": "user", "content": "q"}], max_tokens=5, temperature=0.0))
    assert resp.content == "B"
    assert len(calls) == 3
    assert calls[0]["model"] == "m" and calls[0]["max_tokens"] == 5


def test_openai_client_does_not_retry_4xx() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(400, text="bad request")

    client = _client_with(handler, max_retries=3)
    with pytest.raises(LLMError, match="HTTP 400"):
        asyncio.run(client.chat([{"role": "user", "content": "q"}]))
    assert len(calls) == 1


def test_openai_client_gives_up_after_retries() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client = _client_with(handler, max_retries=2)
    with pytest.raises(LLMError, match="3 attempts"):
        asyncio.run(client.chat([{"role": "user", "content": "q"}]))


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
    handle = _FakeHandle([RuntimeError("replica died"), completion("A")])
    llm = DeploymentHandleChatModel(handle, "served", backoff_s=0.0)
    resp = asyncio.run(llm.chat([{"role": "user", "content": "q"}]))
    assert resp.content == "A"
    assert handle.chat.bodies[-1]["model"] == "served"


def test_handle_model_engine_refusal_is_llm_error() -> None:
    handle = _FakeHandle([{"error": {"message": "Expected 'messages' to be an array", "code": 400}}])
    llm = DeploymentHandleChatModel(handle, "served", backoff_s=0.0)
    with pytest.raises(LLMError, match="backend error"):
        asyncio.run(llm.chat([{"role": "user", "content": "q"}]))
