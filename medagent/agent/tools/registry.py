"""The tools by name: each tool class registers itself in ``TOOLS`` when its module is imported."""

from __future__ import annotations

from medagent.agent.tools.base import TOOLS

__all__ = ["TOOLS"]
