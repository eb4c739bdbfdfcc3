"""``final_answer``: how the model answers. Not run as a tool (the agent reads its argument), but offered
and schema-constrained like one."""

from __future__ import annotations

from typing import Any

from medagent.agent.tools.base import STR, Tool, ToolContext, ToolResult
from medagent.agent.tools.registry import TOOLS

ANSWER_TOOL = "final_answer"
ANSWER_CHARS = 300


@TOOLS.register(ANSWER_TOOL)
class FinalAnswer(Tool):
    name = ANSWER_TOOL
    description = "Give the final answer."
    parameters = {
        "answer": {**STR, "maxLength": ANSWER_CHARS, "description": "option letter, or a short answer"}
    }
    required = ("answer",)
    repeatable = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raise AssertionError("final_answer is read by the agent, never run")  # a bug if reached
