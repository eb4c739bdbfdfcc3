"""Config builders for tests: the QA agent's settings named as single keys (``top_r=4``), placed into the
groups of ``AgentConfig`` by the same map that reads older run manifests (``medagent.config.legacy``)."""

from __future__ import annotations

from typing import Any

from medagent.config import AgentConfig
from medagent.config.legacy import AGENT_MOVES
from medagent.config.qa import FinalAnswerConfig, QARetrievalConfig, SamplingConfig, ToolLoopConfig

GROUPS = {
    "sampling": SamplingConfig,
    "answer": FinalAnswerConfig,
    "loop": ToolLoopConfig,
    "retrieval": QARetrievalConfig,
}


def agent_config(**settings: Any) -> AgentConfig:
    """An ``AgentConfig`` from flat keyword settings; group names (``gate=``) pass through as they are."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in AGENT_MOVES:
            group, leaf = AGENT_MOVES[key].split(".")
            grouped.setdefault(group, {})[leaf] = value
        else:
            top[key] = value
    return AgentConfig(**top, **{g: GROUPS[g](**kw) for g, kw in grouped.items()})
