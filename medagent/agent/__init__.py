"""Agents: each takes a ``Question`` (never a ``Gold``) and returns a ``Prediction``."""

from medagent.agent.base import Agent, build_agent, check_modes, needs_retrieval, register_agent
from medagent.agent.gated import GatedAgent
from medagent.agent.memory import Evidence, MemoryBank
from medagent.agent.no_tools import NoToolsAgent
from medagent.agent.qa import QAAgent
from medagent.agent.services import AgentDeps
from medagent.agent.standalone import StandaloneAgent

__all__ = [
    "Agent",
    "AgentDeps",
    "Evidence",
    "GatedAgent",
    "MemoryBank",
    "NoToolsAgent",
    "QAAgent",
    "StandaloneAgent",
    "build_agent",
    "check_modes",
    "needs_retrieval",
    "register_agent",
]
