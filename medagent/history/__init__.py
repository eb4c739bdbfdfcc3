"""Adaptive clinical history taking (seed B, MedAgent-RAG): state machine, simulator, baseline, metrics.

``build_history_agent`` picks the agent by ``HistoryAgentConfig.mode``; both agents expose
``async run(patient, *, transcript=None) -> InterviewResult``.
"""

from __future__ import annotations

from medagent.agent.services import Retriever
from medagent.config import HistoryAgentConfig, HistoryMode
from medagent.history.agent import HistoryTakingAgent, InterviewResult, Patient, TurnRecord
from medagent.history.assessment import AssessedDiagnosis, Assessment
from medagent.history.baseline import SingleShotBaseline
from medagent.history.redundancy import RedundancyChecker, SentenceEmbedder, TextEmbedder
from medagent.history.reference import Reference, extract_reference, visible_turns
from medagent.history.simulator import FidelityJudge, PatientSimulator
from medagent.history.state import InterviewState, Phase, replay
from medagent.llm.base import ChatModel

HISTORY_MODES = tuple(HistoryMode.names())


def build_history_agent(
    cfg: HistoryAgentConfig,
    llm: ChatModel,
    retriever: Retriever | None = None,
    embedder: TextEmbedder | None = None,
) -> HistoryTakingAgent | SingleShotBaseline:
    """The agent of ``cfg.mode``.

    Raises:
        ValueError: Unknown mode, or a config that is not a history-agent config.
    """
    if cfg.kind != "history":
        raise ValueError(f"not a history-agent config (kind={cfg.kind!r})")
    if cfg.mode == "amq":
        return HistoryTakingAgent(llm, cfg, retriever, embedder)
    if cfg.mode == "single_shot":
        return SingleShotBaseline(llm, cfg)
    raise ValueError(f"agent.mode must be one of {HISTORY_MODES}, got {cfg.mode!r}")


__all__ = [
    "HISTORY_MODES",
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
    "extract_reference",
    "replay",
    "visible_turns",
]
