"""Agent protocol and the registry that maps ``agent.mode`` to an implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.types import Prediction, Question


class Agent(Protocol):
    async def answer(self, question: Question) -> Prediction: ...


AgentFactory = Callable[[ChatModel, AgentConfig, dict[str, Any]], Agent]
_AGENTS: dict[str, AgentFactory] = {}


def register_agent(mode: str) -> Callable[[AgentFactory], AgentFactory]:
    """Registers a factory ``(llm, agent_cfg, services) -> Agent`` under ``mode``."""

    def deco(factory: AgentFactory) -> AgentFactory:
        if mode in _AGENTS:
            raise ValueError(f"agent mode {mode!r} registered twice")
        _AGENTS[mode] = factory
        return factory

    return deco


def build_agent(cfg: AgentConfig, llm: ChatModel, services: dict[str, Any] | None = None) -> Agent:
    """Builds the agent for ``cfg.mode``; ``services`` carries retriever/reranker clients when needed."""
    try:
        factory = _AGENTS[cfg.mode]
    except KeyError:
        raise KeyError(f"unknown agent mode {cfg.mode!r}; registered: {sorted(_AGENTS)}") from None
    return factory(llm, cfg, services or {})
