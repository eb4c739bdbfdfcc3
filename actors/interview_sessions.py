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
from medagent.history.live.sessions import SessionConflict, SessionLimitReached, SessionNotFound
from medagent.llm.endpoints import HandleEndpoint, HttpEndpoint, ServicesEndpoint

__all__ = ["InterviewSessions", "SessionConflict", "SessionLimitReached", "SessionNotFound"]


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
            agent = _build_agent(cfg, to_dataclass(LLMConfig, llm), llm_client, services)
        super().__init__(cfg, agent, clock=clock)  # type: ignore[arg-type]  # checked: a mode that asks no questions raises


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
