"""The registry that maps ``agent.mode`` of a history-taking config to its agent and what that agent can do.

Callers ask a mode's capabilities instead of comparing mode names, so a new mode is one registration:

- ``asks_questions``: it interviews turn by turn through the step API (``start`` / ``step`` / ``observe`` /
  ``finish``), so an HTTP session can drive it, its turns are questions asked, and its slot order
  (``questioning.policy``, ``questioning.priorities``) matters;
- ``tracks_red_flags``: it keeps red-flag state, so red-flag recall applies to it;
- ``reads_context``: what it reads is chosen by ``agent.single_shot.context`` (``opening``, ``full``,
  ``transcript_run``) instead of being asked;
- ``retrieval``: whether it grounds its assessment in guideline retrieval, as a function of its config
  (the pipelines deploy the retriever for it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from medagent.config import HistoryAgentConfig
from medagent.registry import Registry

if TYPE_CHECKING:
    from medagent.history.agent.redundancy import TextEmbedder
    from medagent.llm.base import ChatModel
    from medagent.services import Retriever

# (llm, cfg, retriever, embedder) -> the agent; every agent has ``cfg``, ``mode`` and ``async run``.
HistoryAgentFactory = Callable[
    ["ChatModel", HistoryAgentConfig, "Retriever | None", "TextEmbedder | None"], Any
]


@dataclass(frozen=True)
class HistoryModeSpec:
    """One registered history-taking mode (module docstring)."""

    name: str
    factory: HistoryAgentFactory
    asks_questions: bool
    tracks_red_flags: bool
    reads_context: bool
    retrieval: Callable[[HistoryAgentConfig], bool]


HISTORY_MODES: Registry[HistoryModeSpec] = Registry("history agent mode")


def register_history_mode(
    name: str,
    factory: HistoryAgentFactory,
    *,
    asks_questions: bool = False,
    tracks_red_flags: bool = False,
    reads_context: bool = False,
    retrieval: Callable[[HistoryAgentConfig], bool] = lambda _cfg: False,
) -> HistoryModeSpec:
    """Registers ``name`` with its agent factory and capabilities (module docstring)."""
    spec = HistoryModeSpec(name, factory, asks_questions, tracks_red_flags, reads_context, retrieval)
    HISTORY_MODES.add(name, spec)
    return spec


def history_mode(mode: str | Enum) -> HistoryModeSpec:
    """The registered mode (an enum member reads as its value).

    Raises:
        KeyError: Not a registered mode; the message lists the registered ones.
    """
    return HISTORY_MODES.get(str(getattr(mode, "value", mode)))


def needs_history_retrieval(cfg: HistoryAgentConfig) -> bool:
    """Whether ``cfg``'s agent retrieves guidelines, as its mode registered it."""
    return history_mode(cfg.mode).retrieval(cfg)


def reads_asking_transcript(cfg: HistoryAgentConfig) -> bool:
    """Whether ``cfg``'s agent summarises another arm's interview (``single_shot.context=transcript_run``),
    so it runs after an asking arm and reads that arm's transcript."""
    return cfg.single_shot.context == "transcript_run" and history_mode(cfg.mode).reads_context
