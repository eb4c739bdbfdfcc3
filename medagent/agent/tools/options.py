"""``generate_options``: candidate answers for an open-ended question (the QA paper's open-ended extension)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from medagent.agent.toolargs import text_arg
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.agent.tools.compare import QUESTION_CHARS
from medagent.llm.structured import Output, capped_list, capped_text

# A candidate answer is a diagnosis or a treatment, a few words (agent.cap_outputs).
OPTION_CHARS = 80
MAX_OPTIONS = 10


class OptionsArgs(BaseModel):
    question: str = Field(max_length=QUESTION_CHARS)


class OptionsReply(Output):
    """``qa_generate_options``'s reply; a bare list is read as the options, blank or non-text items dropped."""

    options: list[str]

    @model_validator(mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if isinstance(value, list):
            value = {"options": value}
        if isinstance(value, dict) and isinstance(value.get("options"), list):
            found = [s.strip() for s in value["options"] if isinstance(s, str) and s.strip()]
            value = {**value, "options": found}
        return value


class CappedOptionsReply(OptionsReply):
    options: capped_list(capped_text(OPTION_CHARS), MAX_OPTIONS)  # type: ignore[valid-type]


class GenerateOptions(Tool):
    name = "generate_options"
    description = "Propose candidate answers to an open-ended question."
    args = OptionsArgs
    question_default = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        question = text_arg(args, "question", default=ctx.question.text)
        reply = await ctx.ask(
            "qa_generate_options",
            CappedOptionsReply if ctx.cfg.cap_outputs else OptionsReply,
            question=question,
            n_options=ctx.cfg.loop.n_options,
        )
        found = reply.options if reply is not None else []
        memory = ctx.memory
        for c in found:
            if c not in memory.candidates:
                memory.candidates.append(c)
        if not found:
            return ToolResult(ctx.say("options_failed"), {"candidates": 0})
        listing = "\n".join(f"({i}) {c}" for i, c in enumerate(memory.candidates, 1))
        return ToolResult(ctx.say("options_result", listing=listing), {"candidates": len(found)})
