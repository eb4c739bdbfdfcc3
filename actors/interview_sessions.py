"""The history-taking session store as a Serve deployment: ``medagent.history.live.sessions.InterviewSessions``
with its agent built from the cluster's LLM (handle or endpoint) and guideline retriever.

A plain class made a deployment by ``actors.builder``; the session logic (and its errors) live in the
library and are tested there without Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from medagent.config import InterviewSessionsConfig, LLMConfig, to_dataclass
from medagent.history import HistoryTakingAgent, history_mode
from medagent.history.live.sessions import InterviewSessions as SessionStore
from medagent.history.live.sessions import (
    SessionConflict,
    SessionLimitReached,
    SessionNotFound,
    SessionRefused,
    check_context,
)
from medagent.llm.endpoints import HandleEndpoint, HttpEndpoint, ServicesEndpoint

__all__ = ["InterviewSessions", "SessionConflict", "SessionLimitReached", "SessionNotFound", "SessionRefused"]


class InterviewSessions(SessionStore):
    """``SessionStore`` whose agent is built here from deployment arguments.

    Args:
        sessions: ``InterviewSessionsConfig`` as a dict (agent, embedder, ttl_s, max_sessions).
        llm: ``LLMConfig`` as a dict (served name, retries).
        llm_client: The LLM deployment's handle, or an endpoint record (``medagent.llm.endpoints``).
        services: Where the Retriever that grounds the assessment is (``actors.builder.services_endpoint``;
            None: assessments are not grounded).
        agent: A ready agent (tests inject one built on fakes; then ``llm_client`` and ``retriever`` are unused).
        clock: Seconds, monotonic (tests inject a fake clock).
    """

    def __init__(
        self,
        sessions: dict[str, Any],
        llm: dict[str, Any],
        llm_client: Any = None,
        services: ServicesEndpoint | None = None,
        *,
        agent: HistoryTakingAgent | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        cfg: InterviewSessionsConfig = to_dataclass(InterviewSessionsConfig, sessions)
        if agent is None and history_mode(cfg.agent.mode).asks_questions:
            llm_cfg = to_dataclass(LLMConfig, llm)
            check_context(cfg, llm_cfg)  # a slot too small fails here, not on every interview's last turn
            agent = _build_agent(cfg, llm_cfg, llm_client, services)
        super().__init__(cfg, agent, clock=clock)  # type: ignore[arg-type]  # checked: a mode that asks no questions raises

    async def call(
        self, op: str, *, client: str = "", session_id: str = "", token: str = "", answer: str = ""
    ) -> dict[str, Any]:
        """The HTTP edge's one entry point: a refusal comes back as ``{"refused": status, "detail": ...}``,
        a value, not an exception, because Serve logs a full traceback for every exception a replica raises
        (one client could fill the logs with refusals). The token is always checked here.
        """
        try:
            if op == "start":
                return await self.start(client)
            if op == "answer":
                return await self.answer(session_id, answer, token)
            if op == "get":
                return await self.get(session_id, token)
            if op == "delete":
                await self.delete(session_id, token)
                return {}
        except SessionRefused as exc:
            return {"refused": exc.status, "detail": str(exc)}
        raise ValueError(f"unknown session operation {op!r}")  # our bug, not the client's


def _build_agent(
    cfg: InterviewSessionsConfig, llm: LLMConfig, llm_client: Any, services: ServicesEndpoint | None
) -> HistoryTakingAgent:
    from actors.common import chat_model_for, retriever_for, text_embedder
    from medagent.llm.handle import DeploymentHandleChatModel

    if isinstance(llm_client, HandleEndpoint | HttpEndpoint):
        chat = chat_model_for(llm, llm_client)
    else:
        chat = DeploymentHandleChatModel(llm_client, llm.served_name, max_retries=llm.max_retries)
    remote = retriever_for(services)
    agent_cfg = cfg.agent
    agent_cfg.generation.json_schema = agent_cfg.generation.json_schema and llm.supports_json_schema
    embedder = text_embedder(None if cfg.embedder is None else asdict(cfg.embedder))
    return HistoryTakingAgent(chat, agent_cfg, remote, embedder)
