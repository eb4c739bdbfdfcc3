"""``relevance_analysis``: the next batch of B queued documents, judged relevant or not (cache-and-prune)."""

from __future__ import annotations

from typing import Any

from medagent.agent.memory import Judgement
from medagent.agent.render import documents_block, escape_data
from medagent.agent.toolargs import ToolError, judgements
from medagent.agent.tools.base import STR, Tool, ToolContext, ToolResult, arr, obj
from medagent.agent.tools.registry import TOOLS


@TOOLS.register("relevance_analysis")
class RelevanceAnalysis(Tool):
    name = "relevance_analysis"
    description = "Review the next batch of queued documents and judge whether each is relevant."
    repeatable = True  # each call opens the next batch

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        memory = ctx.memory
        if memory.batches_left == 0:
            raise ToolError(ctx.say("review_exhausted", max_batches=memory.max_batches))
        batch = memory.next_batch()
        if not batch:
            raise ToolError(ctx.say("review_empty"))
        docs = [(h, memory.doc(h)) for h in batch]
        schema = obj(judgements=arr(obj(id=STR, relevant={"type": "boolean"}, reason=STR)))
        value = await ctx.ask(
            "qa_relevance",
            schema,
            question=ctx.question.text,
            options=ctx.options(),
            documents=documents_block(docs, ctx.cfg.doc_max_chars),
        )
        verdicts = judgements(value, batch)
        lines = []
        for h, d in docs:
            relevant, reason = verdicts.get(h, (None, ""))
            memory.judge(Judgement(h, relevant, reason))
            label = {True: "relevant", False: "not relevant", None: "no verdict"}[relevant]
            note = f": {escape_data(reason)}" if reason else ""
            lines.append(f'{h} [{escape_data(d.source)}] "{escape_data(d.title)}": {label}{note}')
        content = ctx.say(
            "review_result", batch=memory.batches_reviewed, max_batches=memory.max_batches, lines="\n".join(lines),
            queued=len(memory.queue),
        )  # fmt: skip
        return ToolResult(
            content, {"batch": batch, "relevant": [h for h in batch if verdicts.get(h, (None,))[0]]}
        )
