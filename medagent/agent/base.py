"""Agent protocol and the registry that maps ``agent.mode`` to an implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from medagent.agent.services import AgentDeps
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.registry import Registry
from medagent.types import Prediction, Question


class Agent(Protocol):
    async def answer(self, question: Question) -> Prediction: ...


AgentFactory = Callable[[ChatModel, AgentConfig, AgentDeps], Agent]
AGENTS: Registry[AgentFactory] = Registry("agent mode")
# Whether a mode's agent searches (needs the retriever and reranker deployed), by mode.
_RETRIEVAL: dict[str, Callable[[AgentConfig], bool]] = {}


def register_agent(
    mode: str, *, retrieval: bool | Callable[[AgentConfig], bool] = False
) -> Callable[[AgentFactory], AgentFactory]:
    """Registers a factory ``(llm, agent_cfg, deps) -> Agent`` under ``mode``.

    Args:
        mode: The ``agent.mode`` it answers to.
        retrieval: Whether the agent searches, or a function of its config that says so (the gated
            agent searches when its tools part does); ``needs_retrieval`` reads it.
    """

    def deco(factory: AgentFactory) -> AgentFactory:
        AGENTS.add(mode, factory)
        _RETRIEVAL[mode] = retrieval if callable(retrieval) else _always(retrieval)
        return factory

    return deco


def _always(value: bool) -> Callable[[AgentConfig], bool]:
    return lambda _cfg: value


def check_modes(cfg: AgentConfig) -> None:
    """Raises ``KeyError`` listing the registered modes when ``cfg.mode`` or ``cfg.gate.tools_mode`` is not one.

    The registry is the source of truth for mode names, and it lives here rather than in ``medagent.config``
    so that the configs do not import the agents (which import the configs). Every pipeline reaches this
    through ``needs_retrieval`` before it starts Ray.
    """
    AGENTS.get(cfg.mode)
    AGENTS.get(cfg.gate.tools_mode)


def needs_retrieval(cfg: AgentConfig) -> bool:
    """Whether ``cfg``'s agent searches, as its mode registered it (the pipelines deploy search for it)."""
    check_modes(cfg)
    return _RETRIEVAL[cfg.mode](cfg)


def build_agent(cfg: AgentConfig, llm: ChatModel, deps: AgentDeps | None = None) -> Agent:
    """Builds the agent for ``cfg.mode``; ``deps`` carries the retriever/reranker clients when needed and
    what the backend can do."""
    check_modes(cfg)
    return AGENTS.get(cfg.mode)(llm, cfg, deps or AgentDeps())
