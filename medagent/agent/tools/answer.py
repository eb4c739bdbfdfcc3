"""``final_answer``: how the model answers. Not run as a tool (the agent reads its argument), but offered
and schema-constrained like one."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from medagent.agent.tools.base import Tool, ToolContext, ToolResult

ANSWER_TOOL = "final_answer"
ANSWER_CHARS = 300


class AnswerArgs(BaseModel):
    answer: str = Field(max_length=ANSWER_CHARS, description="option letter, or a short answer")


class FinalAnswer(Tool):
    name = ANSWER_TOOL
    description = "Give the final answer."
    args = AnswerArgs
    repeatable = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        raise AssertionError("final_answer is read by the agent, never run")  # a bug if reached
