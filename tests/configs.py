"""Config builders for tests: the QA agent's and the history-taking agent's settings named as single keys
(``top_r=4``, ``max_replacements=0``), placed into the groups of ``AgentConfig`` and ``HistoryAgentConfig`` by the
same maps that read older run manifests (``medagent.config.legacy``)."""

from __future__ import annotations

from typing import Any

from medagent.config import AgentConfig
from medagent.config.interview import (
    HistoryAgentConfig,
    HistoryGenerationConfig,
    HistoryRetrievalConfig,
    PhasesConfig,
    QuestioningConfig,
    RedundancyConfig,
    SingleShotConfig,
)
from medagent.config.legacy import AGENT_MOVES, HISTORY_AGENT_MOVES
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


HISTORY_GROUPS = {
    "questioning": QuestioningConfig,
    "phases": PhasesConfig,
    "redundancy": RedundancyConfig,
    "generation": HistoryGenerationConfig,
    "retrieval": HistoryRetrievalConfig,
    "single_shot": SingleShotConfig,
}


def history_agent_config(**settings: Any) -> HistoryAgentConfig:
    """A ``HistoryAgentConfig`` from flat keyword settings under their former names (``policy=``,
    ``retrieval=False``), placed into the groups by ``HISTORY_AGENT_MOVES``."""
    top: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in HISTORY_AGENT_MOVES:
            group, leaf = HISTORY_AGENT_MOVES[key].split(".")
            grouped.setdefault(group, {})[leaf] = value
        else:
            top[key] = value
    return HistoryAgentConfig(**top, **{g: HISTORY_GROUPS[g](**kw) for g, kw in grouped.items()})
