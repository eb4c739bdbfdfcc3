"""The tools by name: each tool module registers its class here when ``medagent.agent.tools`` imports it."""

from __future__ import annotations

from medagent.agent.tools.base import Tool
from medagent.registry import Registry

TOOLS: Registry[type[Tool]] = Registry("tool")
