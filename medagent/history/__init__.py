"""Clinical history taking (the history-taking agent of MedAgent-RAG, Jabbar et al.; see README.md).

Subpackages by concern: ``agent`` (the agents at run time), ``simulation`` (the simulated patient and the
reference), ``evaluation`` (runner, metrics, paired statistics, report), ``live`` (HTTP sessions).
``build_history_agent`` picks the agent by ``HistoryAgentConfig.mode`` (registered in
``agent.modes``); both agents expose ``async run(patient, *, transcript=None) -> InterviewResult``.
"""

from __future__ import annotations

from medagent.config import HistoryAgentConfig
from medagent.history.agent.amq import HistoryTakingAgent, InterviewResult, Patient, TurnRecord
from medagent.history.agent.assessment import AssessedDiagnosis, Assessment
from medagent.history.agent.modes import (
    HISTORY_MODES,
    HistoryModeSpec,
    history_mode,
    needs_history_retrieval,
    reads_asking_transcript,
    register_history_mode,
)
from medagent.history.agent.redundancy import RedundancyChecker, SentenceEmbedder, TextEmbedder
from medagent.history.agent.single_shot import SingleShotBaseline
from medagent.history.agent.state import InterviewState, Phase, replay
from medagent.history.simulation.reference import Reference, extract_reference, visible_turns
from medagent.history.simulation.simulator import FidelityJudge, PatientSimulator
from medagent.llm.base import ChatModel
from medagent.services import Retriever


def build_history_agent(
    cfg: HistoryAgentConfig,
    llm: ChatModel,
    retriever: Retriever | None = None,
    embedder: TextEmbedder | None = None,
) -> HistoryTakingAgent | SingleShotBaseline:
    """The agent of ``cfg.mode``, as its mode registered it (``HISTORY_MODES``).

    Raises:
        ValueError: Unknown mode, or a config that is not a history-agent config.
    """
    if cfg.kind != "history":
        raise ValueError(f"not a history-agent config (kind={cfg.kind!r})")
    try:
        spec = history_mode(cfg.mode)
    except KeyError:
        raise ValueError(f"agent.mode must be one of {HISTORY_MODES.names()}, got {cfg.mode!r}") from None
    agent: HistoryTakingAgent | SingleShotBaseline = spec.factory(llm, cfg, retriever, embedder)
    return agent


__all__ = [
    "HISTORY_MODES",
    "HistoryModeSpec",
    "AssessedDiagnosis",
    "Assessment",
    "FidelityJudge",
    "HistoryTakingAgent",
    "InterviewResult",
    "InterviewState",
    "Patient",
    "PatientSimulator",
    "Phase",
    "RedundancyChecker",
    "Reference",
    "SentenceEmbedder",
    "SingleShotBaseline",
    "TextEmbedder",
    "TurnRecord",
    "build_history_agent",
    "history_mode",
    "needs_history_retrieval",
    "reads_asking_transcript",
    "register_history_mode",
    "extract_reference",
    "replay",
    "visible_turns",
]
