"""``locate_evidence``: verbatim quotes from the batch under review, verified and cached in memory."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from medagent.agent.memory import Evidence, verify_quote
from medagent.agent.render import documents_block, escape_data, evidence_block
from medagent.agent.toolargs import ToolError, doc_handles
from medagent.agent.tools.base import Tool, ToolContext, ToolResult
from medagent.llm.structured import Output, Text, capped_list, capped_text

# The capped reply (agent.cap_outputs): a quote is a passage of a few sentences (a cut quote is still
# verbatim, and is verified like any), at most two per document of a full batch.
QUOTE_CHARS = 400
MAX_QUOTES = 8


class LocateArgs(BaseModel):
    doc_ids: list[Annotated[str, Field(max_length=8)]] = Field(max_length=8, description='e.g. ["D1", "D3"]')


class Quote(Output):
    id: Text
    quote: Text


class LocateReply(Output):
    """``qa_locate``'s reply, read from the shapes small models write: ``quotes`` for ``evidence``, ``doc_id``
    for ``id``, ``text`` or a list of quotes for ``quote``, a bare list of items."""

    evidence: list[Quote]

    @model_validator(mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = value.get("evidence", value.get("quotes", []))
        out = []
        for item in value if isinstance(value, list) else []:
            if not isinstance(item, dict):
                continue
            ident = item.get("id", item.get("doc_id"))
            found = item.get("quote", item.get("quotes", item.get("text")))
            for quote in found if isinstance(found, list) else [found]:
                if isinstance(quote, str) and quote.strip() and ident is not None:
                    out.append(
                        {"id": ident if isinstance(ident, str) else str(ident), "quote": quote.strip()}
                    )
        return {"evidence": out}

    def pairs(self, allowed: list[str]) -> list[tuple[str, str]]:
        """``(handle, quote)`` for the quotes of ``allowed`` documents."""
        out = []
        for e in self.evidence:
            ids = doc_handles(e.id)
            if ids and ids[0] in allowed:
                out.append((ids[0], e.quote))
        return out


class CappedQuote(Quote):
    id: capped_text(8)  # type: ignore[valid-type]
    quote: capped_text(QUOTE_CHARS)  # type: ignore[valid-type]


class CappedLocateReply(LocateReply):
    evidence: capped_list(CappedQuote, MAX_QUOTES)  # type: ignore[valid-type]


class LocateEvidence(Tool):
    name = "locate_evidence"
    description = "Quote the supporting passages of reviewed documents; the quotes are kept in memory."
    args = LocateArgs

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
        memory = ctx.memory
        wanted = doc_handles(args.get("doc_ids", args.get("ids", args.get("doc_id"))))
        if not wanted:
            raise ToolError(ctx.say("locate_no_ids"))
        done = [h for h in wanted if h in memory.grounded]
        if done and len(done) == len(wanted):
            # A small model at temperature 0 asks for the same quotes again and again: refuse without a call.
            nxt = "relevance_analysis for the next batch" if memory.batches_left else "final_answer"
            raise ToolError(ctx.say("locate_done", done=", ".join(done), next=nxt))
        wanted = [h for h in wanted if h not in done]
        ok = [h for h in wanted if memory.is_reviewable(h)]
        if not ok:
            pending = str(memory.pending) if memory.pending else "none; call relevance_analysis"
            raise ToolError(ctx.say("locate_not_reviewable", wanted=str(wanted), pending=pending))
        docs = [(h, memory.doc(h)) for h in ok]
        reply = await ctx.ask(
            "qa_locate",
            CappedLocateReply if ctx.cfg.cap_outputs else LocateReply,
            question=ctx.question.text,
            options=ctx.options(),
            documents=documents_block(docs, ctx.cfg.loop.doc_max_chars),
        )
        cached: list[Evidence] = []
        unverified: list[Evidence] = []
        for h, quote in reply.pairs(ok) if reply is not None else []:
            ev = memory.cache(h, quote, verify_quote(quote, memory.doc(h)))
            (cached if ev.verified else unverified).append(ev)
        parts = [
            ctx.say("locate_cached", evidence=evidence_block(cached)) if cached else ctx.say("locate_none")
        ]
        if unverified:
            listing = "; ".join(f"{e.handle}: {escape_data(e.quote[:200])!r}" for e in unverified)
            parts.append(ctx.say("locate_unverified", listing=listing))
        skipped = [h for h in wanted if h not in ok]
        if skipped:
            parts.append(ctx.say("locate_skipped", skipped=", ".join(skipped)))
        summary = {"docs": ok, "cached": len(cached), "unverified": len(unverified), "skipped": skipped}
        return ToolResult("\n".join(parts), summary)
