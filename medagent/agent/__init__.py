"""Agents: each takes a ``Question`` (never a ``Gold``) and returns a ``Prediction``."""

from medagent.agent.base import Agent, build_agent, register_agent
from medagent.agent.standalone import StandaloneAgent

__all__ = ["Agent", "StandaloneAgent", "build_agent", "register_agent"]
