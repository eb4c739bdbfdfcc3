"""The ingress (``actors.ingress``) on fakes, without Ray: its FastAPI app under Starlette's TestClient, the
replica context pointed at an ``Ingress`` whose handles are fakes (``.method.remote(...)`` is awaitable, as a
Serve handle's response is), and a real session store driving a scripted clinician."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import pytest
from fastapi.testclient import TestClient

from actors.ingress import Ingress, app
from actors.interview_sessions import InterviewSessions
from medagent.config import InterviewSessionsConfig, LLMConfig
from medagent.history import HistoryTakingAgent
from tests.configs import history_agent_config
from tests.unit._history_fakes import BagOfWordsEmbedder, FakeClinician, FakeRetriever

INFO = {
    "llm_served_name": "smollm2-135m",
    "llm_n_ctx": 2048,
    "index_dir": "/data/index/secret",
    "reranker": "x",
}


class Method:
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class FakeLLM:
    """Records the bodies it gets; answers like llama.cpp, naming its model by file."""

    def __init__(self, reply: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.reply = reply or {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
        self.error = error
        self.chat = Method(self._chat)

    async def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        if self.error is not None:
            raise self.error
        return {**self.reply, "model": "/root/.cache/models/SmolLM2-135M-Instruct-Q4_1.gguf"}


class FakeReranker:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.rerank = Method(self._rerank)

    async def _rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        return {"results": {c["id"]: 1.0 / (i + 1) for i, c in enumerate(body["candidates"])}}


def session_store(
    *, max_sessions: int = 8, starts_per_client: int = 2, max_turns: int = 3
) -> InterviewSessions:
    cfg = InterviewSessionsConfig(
        enabled=True,
        agent=history_agent_config(max_turns=max_turns),
        ttl_s=600,
        max_sessions=max_sessions,
        starts_per_client=starts_per_client,
    )
    agent = HistoryTakingAgent(FakeClinician().model, cfg.agent, FakeRetriever(), BagOfWordsEmbedder())
    return InterviewSessions(asdict(cfg), asdict(LLMConfig()), agent=agent)


class SessionsHandle:
    def __init__(self, store: InterviewSessions) -> None:
        self.store = store
        self.call = Method(store.call)


def client_for(
    monkeypatch: pytest.MonkeyPatch,
    *,
    llm: Any = None,
    reranker: Any = None,
    sessions: InterviewSessions | None = None,
    raise_server_exceptions: bool = True,
) -> TestClient:
    ingress = object.__new__(Ingress)  # the wrapped class's __init__ wants a Serve replica
    ingress.llm_endpoint, ingress.llm, ingress.reranker, ingress.info = None, llm, reranker, dict(INFO)
    ingress.sessions = SessionsHandle(sessions) if sessions is not None else None
    monkeypatch.setattr(
        "ray.serve.get_replica_context", lambda: types.SimpleNamespace(servable_object=ingress)
    )
    return TestClient(app, raise_server_exceptions=raise_server_exceptions)
