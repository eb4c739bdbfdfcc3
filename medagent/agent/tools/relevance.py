"""``relevance_analysis``: the next batch of B queued documents, judged relevant or not (cache-and-prune)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema, model_validator

from medagent.agent.memory import Judgement
from medagent.agent.render import documents_block, escape_data
from medagent.agent.toolargs import ToolError, doc_handles
from medagent.agent.tools.base import NoArgs, Tool, ToolContext, ToolResult
from medagent.llm.structured import Output, Text, capped_list, capped_text

_LISTS = ("judgements", "documents", "results")
# The capped reply (agent.cap_outputs): a verdict's reason is one short sentence, shown to the agent
# beside the verdict; a judgement per document of the batch (at most MAX_BATCH).
REASON_CHARS = 100
MAX_BATCH = 16


class Judged(Output):
    id: Text
    # None: the model gave no readable verdict (the document is then recorded as "no verdict").
    relevant: Annotated[bool | None, WithJsonSchema({"type": "boolean"})]
    reason: Text


class RelevanceReply(Output):
    """``qa_relevance``'s reply, read from the shapes small models write: a ``{id: verdict}`` mapping,
    ``documents``/``results`` for ``judgements``, ``doc_id``, ``relevance``, verdicts as "yes"/"no"."""

    judgements: list[Judged]

    @model_validator(mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if isinstance(value, dict) and not any(k in value for k in _LISTS):
            value = [{"id": k, "relevant": v} for k, v in value.items()]
        elif isinstance(value, dict):
            value = next(value[k] for k in _LISTS if k in value)
        out = []
        for item in value if isinstance(value, list) else []:
            if not isinstance(item, dict):
                continue
            verdict = item.get("relevant", item.get("relevance"))
            if isinstance(verdict, str):
                low = verdict.strip().lower()
                verdict = True if low in ("yes", "true", "relevant") else False if low else None
            ident = item.get("id", item.get("doc_id"))
            out.append({
                "id": "" if ident is None else ident if isinstance(ident, str) else str(ident),
                "relevant": verdict if isinstance(verdict, bool) else None,
                "reason": str(item.get("reason", ""))[:300],
            })  # fmt: skip
        return {"judgements": out}

    def by_handle(self, batch: list[str]) -> dict[str, tuple[bool | None, str]]:
        """Verdict and reason by handle, for the documents of ``batch`` (the last word on one wins)."""
        out: dict[str, tuple[bool | None, str]] = {}
        for j in self.judgements:
            ids = doc_handles(j.id)
            if ids and ids[0] in batch:
                out[ids[0]] = (j.relevant, j.reason)
        return out


class CappedJudged(Judged):
    id: capped_text(8)  # type: ignore[valid-type]
    reason: capped_text(REASON_CHARS)  # type: ignore[valid-type]


class CappedRelevanceReply(RelevanceReply):
    judgements: capped_list(CappedJudged, MAX_BATCH)  # type: ignore[valid-type]


class RelevanceAnalysis(Tool):
    name = "relevance_analysis"
    description = "Review the next batch of queued documents and judge whether each is relevant."
    args = NoArgs
    repeatable = True  # each call opens the next batch

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        memory = ctx.memory
        if memory.batches_left == 0:
            raise ToolError(ctx.say("review_exhausted", max_batches=memory.max_batches))
        batch = memory.next_batch()
        if not batch:
            raise ToolError(ctx.say("review_empty"))
        docs = [(h, memory.doc(h)) for h in batch]
        reply = await ctx.ask(
            "qa_relevance",
            CappedRelevanceReply if ctx.cfg.cap_outputs else RelevanceReply,
            question=ctx.question.text,
            options=ctx.options(),
            documents=documents_block(docs, ctx.cfg.loop.doc_max_chars),
        )
        verdicts = reply.by_handle(batch) if reply is not None else {}
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
