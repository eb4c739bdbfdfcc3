"""The serving edge on fakes (``tests.unit._edge_fakes``): the chat allow-list, client mistakes as short
4xx with one log line, bounded bodies, no leaks, the pages' headers. Findings 1, 3, 4, 6, 7, 8 of the edge
review; sessions are in ``test_edge_sessions``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from medagent.api import MAX_BODY_BYTES, MAX_MESSAGES, MAX_TOP_LOGPROBS
from medagent.llm.base import LLMError
from tests.unit._edge_fakes import FakeLLM, FakeReranker, client_for

CHAT = "/v1/chat/completions"
MSG = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "enable_search", "parameters": {"type": "object"}}}


def chat(**extra: Any) -> dict[str, Any]:
    return {"messages": MSG, "max_tokens": 8, **extra}


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, llm: FakeLLM) -> Any:
    return client_for(monkeypatch, llm=llm, reranker=FakeReranker())


def edge_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "medagent.edge"]


def test_engine_fields_outside_the_allow_list_are_refused_before_the_engine(
    client: Any, llm: FakeLLM
) -> None:
    for field, value in [("n_probs", 10**6), ("n_predict", 400), ("cache_prompt", True), ("grammar", "x")]:
        r = client.post(CHAT, json=chat(**{field: value}))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == field, r.text
    for field, value in [("top_logprobs", MAX_TOP_LOGPROBS + 1), ("n", 2), ("seed", -1), ("stop", ["a"] * 5)]:
        r = client.post(CHAT, json=chat(**{field: value}))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"].startswith(field), r.text
    assert llm.bodies == []
    ok = chat(tools=[TOOL], tool_choice="required", logprobs=True, top_logprobs=3, seed=1, stop=["\n"])
    assert client.post(CHAT, json=ok).status_code == 200
    (body,) = llm.bodies
    assert set(body) <= {
        "messages",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "stop",
        "logprobs",
        "top_logprobs",
        "stream",
    }
    assert body["max_tokens"] == 8 and body["tools"] == [TOOL]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (chat(tools="abc"), "tools"),
        (chat(tools=[{"type": "function", "function": {"description": "no name"}}]), "tools.0.function.name"),
        (chat(messages=[{"role": "assistant", "tool_calls": [{"id": 1}]}]), "messages.0.tool_calls.0"),
        (
            chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
            "messages.0.content",
        ),
        (chat(messages=[{"role": "user", "content": "\ud800"}]), "messages.0.content"),
    ],
)
def test_client_mistakes_are_a_422_naming_the_field(
    client: Any, llm: FakeLLM, body: dict[str, Any], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    r = client.post(CHAT, content=json.dumps(body), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert any(e["loc"].startswith(field) for e in r.json()["detail"]), r.text
    assert all(set(e) == {"loc", "msg", "type"} for e in r.json()["detail"]) and llm.bodies == []
    (line,) = edge_lines(caplog)
    assert line.exc_info is None and "422" in line.getMessage()


def test_temperature_nan_is_refused(client: Any) -> None:
    # Python's json writes NaN as a bare token, which FastAPI's parser accepts.
    r = client.post(
        CHAT, content=json.dumps(chat(temperature=float("nan"))), headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "temperature", r.text


def test_deep_nesting_is_refused_on_the_raw_bytes_with_one_short_line(
    client: Any, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    deep = "[" * 900 + "]" * 900
    raw = '{"messages": [{"role": "user", "content": "hi"}], "tools": ' + deep + "}"
    r = client.post(CHAT, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "nested deeper" in r.text and len(r.content) < 200
    assert llm.bodies == [] and len(edge_lines(caplog)) == 1
    assert sum(len(rec.getMessage()) for rec in caplog.records) < 2000  # not megabytes
    # Brackets inside strings are text, not nesting.
    assert client.post(CHAT, json=chat(messages=[{"role": "user", "content": "[" * 900}])).status_code == 200


def test_bodies_are_bounded_before_parsing(client: Any, llm: FakeLLM) -> None:
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * MAX_BODY_BYTES + b'"}]}'
    r = client.post(CHAT, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and len(r.content) < 200
    many = chat(messages=[{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1))
    r = client.post(CHAT, json=many)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "messages" and len(r.content) < 1000
    assert llm.bodies == []


def test_json_routes_refuse_other_content_types(client: Any, llm: FakeLLM) -> None:
    for ctype in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]:
        r = client.post(CHAT, content=json.dumps(chat()), headers={"content-type": ctype} if ctype else {})
        assert r.status_code == 415, (ctype, r.text)
    assert llm.bodies == []
    r = client.post(
        CHAT, content=json.dumps(chat()), headers={"content-type": "application/json; charset=utf-8"}
    )
    assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"


def test_replies_name_no_path_and_no_backend_text(monkeypatch: pytest.MonkeyPatch, client: Any) -> None:
    r = client.post(CHAT, json=chat())
    assert r.json()["model"] == "smollm2-135m" and ".gguf" not in r.text
    health = client.get("/healthz").json()
    assert "index_dir" not in health and "/data/" not in json.dumps(health)
    failing = client_for(
        monkeypatch, llm=FakeLLM(error=LLMError("llama.cpp at /opt/models/x.gguf: slot 3 died"))
    )
    r = failing.post(CHAT, json=chat())
    assert r.status_code == 502 and "gguf" not in r.text and "slot" not in r.text
    refused = FakeLLM(reply={"error": {"code": 500, "message": "/opt/models/x.gguf failed"}})
    r = client_for(monkeypatch, llm=refused).post(CHAT, json=chat())
    assert r.status_code == 502 and "gguf" not in r.text


def test_pages_carry_csp_frame_and_nosniff_headers_and_docs_are_off(client: Any) -> None:
    for path in ["/interview", "/interview/interview.js"]:
        r = client.get(path)
        assert r.status_code == 200
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    assert (
        "access-control-allow-origin"
        not in client.get("/healthz", headers={"origin": "https://evil.example"}).headers
    )


def test_rerank_requests_are_bounded(client: Any) -> None:
    from medagent.api import MAX_CANDIDATE_CHARS, MAX_CANDIDATES

    cands = [{"id": str(i), "text": "t"} for i in range(MAX_CANDIDATES + 1)]
    r = client.post("/v1/rerank", json={"query": "q", "candidates": cands})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == "candidates"
    long = [{"id": "0", "text": "x" * (MAX_CANDIDATE_CHARS + 1)}]
    r = client.post("/v1/rerank", json={"query": "q", "candidates": long})
    assert r.status_code == 422 and len(r.content) < 500  # the 4,001 characters are not echoed
    assert (
        client.post("/v1/rerank", json={"query": "q", "candidates": cands[:MAX_CANDIDATES]}).status_code
        == 200
    )


def test_our_own_bugs_still_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    buggy = client_for(monkeypatch, llm=FakeLLM(error=KeyError("a bug of ours")))
    with pytest.raises(KeyError):
        buggy.post(CHAT, json=chat())
