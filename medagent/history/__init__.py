"""Adaptive clinical history taking (seed B, MedAgent-RAG): state machine, simulator, baseline, metrics.

``build_history_agent`` picks the agent by ``HistoryAgentConfig.mode``; both agents expose
``async run(patient, *, transcript=None) -> InterviewResult``.
"""

from __future__ import annotations

from medagent.config import HistoryAgentConfig
from medagent.history.agent.amq import HistoryTakingAgent, InterviewResult, Patient, TurnRecord
from medagent.history.agent.assessment import AssessedDiagnosis, Assessment
from medagent.history.agent.redundancy import RedundancyChecker, SentenceEmbedder, TextEmbedder
from medagent.history.agent.single_shot import SingleShotBaseline
from medagent.history.agent.state import InterviewState, Phase, replay
from medagent.history.simulation.reference import Reference, extract_reference, visible_turns
from medagent.history.simulation.simulator import FidelityJudge, PatientSimulator
from medagent.llm.base import ChatModel
from medagent.services import Retriever

HISTORY_MODES = ("amq", "single_shot")


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
