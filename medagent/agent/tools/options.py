"""``generate_options``: candidate answers for an open-ended question (seed A's open-ended extension)."""

from __future__ import annotations

from typing import Any

from medagent.agent.toolargs import text_arg
from medagent.agent.tools.base import STR, Tool, ToolContext, ToolResult, arr, obj
from medagent.agent.tools.compare import QUESTION_CHARS
from medagent.agent.tools.registry import TOOLS


@TOOLS.register("generate_options")
class GenerateOptions(Tool):
    name = "generate_options"
    description = "Propose candidate answers to an open-ended question."
    parameters = {"question": {**STR, "maxLength": QUESTION_CHARS}}
    required = ("question",)
    question_default = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        question = text_arg(args, "question", default=ctx.question.text)
        value = await ctx.ask(
            "qa_generate_options", obj(options=arr(STR)), question=question, n_options=ctx.cfg.n_options
        )
        items = value.get("options") if isinstance(value, dict) else value
        found = (
            [s.strip() for s in items if isinstance(s, str) and s.strip()] if isinstance(items, list) else []
        )
        memory = ctx.memory
        for c in found:
            if c not in memory.candidates:
                memory.candidates.append(c)
        if not found:
            return ToolResult(ctx.say("options_failed"), {"candidates": 0})
        listing = "\n".join(f"({i}) {c}" for i, c in enumerate(memory.candidates, 1))
        return ToolResult(ctx.say("options_result", listing=listing), {"candidates": len(found)})
