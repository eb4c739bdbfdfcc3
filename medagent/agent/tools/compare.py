"""``perform_comparison``: every answer option against the findings of the question (seed A's first tool)."""

from __future__ import annotations

from typing import Any

from medagent.agent.toolargs import ToolError, options_arg, text_arg
from medagent.agent.tools.base import STR, Tool, ToolContext, ToolResult, arr, obj
from medagent.agent.tools.registry import TOOLS

QUESTION_CHARS = 4000


@TOOLS.register("perform_comparison")
class PerformComparison(Tool):
    name = "perform_comparison"
    description = "Compare every answer option with the findings in the question (structured)."
    parameters = {
        "question": {**STR, "maxLength": QUESTION_CHARS},
        "options": {"type": "object", "description": "letter -> option"},
    }
    required = ("question",)
    question_default = True

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        question = text_arg(args, "question", default=ctx.question.text)
        # Multiple choice compares the real options (a model-written list could drop or invent one);
        # open-ended compares the model's own candidates.
        options = ctx.options()
        given = args.get("options")
        if options is None or (ctx.cfg.open_ended and given):
            options = options_arg(given)
        if not options:
            raise ToolError(ctx.say("compare_no_options"))
        schema = obj(comparison=arr(obj(option=STR, supporting=STR, against=STR, verdict=STR)))
        value = await ctx.ask("qa_compare", schema, question=question, options=options)
        rows = value.get("comparison") if isinstance(value, dict) else value
        if not isinstance(rows, list) or not rows:
            return ToolResult(ctx.say("compare_failed"), {"rows": 0})
        lines = [
            f"({r.get('option', '?')}) {r.get('verdict', '?')}: for: {r.get('supporting', '')}; "
            f"against: {r.get('against', '')}"
            for r in rows
            if isinstance(r, dict)
        ]
        return ToolResult(ctx.say("compare_result", lines="\n".join(lines)), {"rows": len(lines)})
