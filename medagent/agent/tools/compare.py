"""``perform_comparison``: every answer option against the findings of the question (the QA paper's first tool)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from medagent.agent.toolargs import ToolError, options_arg, text_arg
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.llm.structured import Output, Text, capped_list, capped_text, enum_str

QUESTION_CHARS = 4000
# The capped reply (agent.cap_outputs): each side of an option's comparison is one clause of findings,
# the verdict one of the prompt's three words; a row per option, at most MAX_ROWS options.
ROW_CHARS = 100
VERDICTS = ("likely", "possible", "unlikely")
MAX_ROWS = 10


class CompareArgs(BaseModel):
    question: str = Field(max_length=QUESTION_CHARS)
    options: Any = Field(None, description="letter -> option", json_schema_extra={"type": "object"})


class ComparisonRow(Output):
    option: Text = "?"
    supporting: Text = ""
    against: Text = ""
    verdict: Text = "?"


class CappedRow(ComparisonRow):
    option: capped_text(8) = "?"  # type: ignore[valid-type]
    supporting: capped_text(ROW_CHARS) = ""  # type: ignore[valid-type]
    against: capped_text(ROW_CHARS) = ""  # type: ignore[valid-type]
    verdict: Annotated[enum_str(VERDICTS), BeforeValidator(str)] = "?"  # type: ignore[valid-type]


class CompareReply(Output):
    """``qa_compare``'s reply; a bare list of rows is read as the comparison, rows that are no object dropped."""

    comparison: list[ComparisonRow]

    @model_validator(mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if isinstance(value, list):
            value = {"comparison": value}
        if isinstance(value, dict) and isinstance(value.get("comparison"), list):
            value = {**value, "comparison": [r for r in value["comparison"] if isinstance(r, dict)]}
        return value


class CappedCompareReply(CompareReply):
    """``CompareReply`` with every free-text field bounded in the schema (what constrained decoding writes)."""

    comparison: capped_list(CappedRow, MAX_ROWS)  # type: ignore[valid-type]


class PerformComparison(Tool):
    name = "perform_comparison"
    description = "Compare every answer option with the findings in the question (structured)."
    args = CompareArgs
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
        output = CappedCompareReply if ctx.cfg.cap_outputs else CompareReply
        reply = await ctx.ask("qa_compare", output, question=question, options=options)
        if reply is None or not reply.comparison:
            return ToolResult(ctx.say("compare_failed"), {"rows": 0})
        lines = [
            f"({r.option}) {r.verdict}: for: {r.supporting}; against: {r.against}" for r in reply.comparison
        ]
        return ToolResult(ctx.say("compare_result", lines="\n".join(lines)), {"rows": len(lines)})
