"""Seed A's five tools: their OpenAI function schemas and what each does.

``ToolBox.run`` executes one call against the question's ``MemoryBank``. A call the model got wrong (a
missing argument, a document that cannot be quoted, a review with nothing queued) raises ``ToolError``,
which the agent turns into an observation; anything else that raises is a bug or a service failure and
propagates. Tools that need the model (comparison, options, relevance, evidence) make their own short
LLM call: the documents go to that call as data, and only judgements and verified quotes come back into
the agent's conversation.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from medagent.agent.memory import Evidence, Judgement, MemoryBank, verify_quote
from medagent.agent.render import documents_block, escape_data, evidence_block
from medagent.agent.services import Doc, Reranker, Retriever
from medagent.agent.toolargs import ToolError, doc_handles, judgements, options_arg, quotes, text_arg
from medagent.agent.toolcalls import decode_json
from medagent.agent.trace import Recorder
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.prompts import load_prompt
from medagent.types import Question

ANSWER_TOOL = "final_answer"

_STR = {"type": "string"}
# Length caps on every string argument: under guided decoding (vLLM's tool_choice="required", the
# llama.cpp call schema) a small model otherwise keeps one string open until max_tokens cuts the call
# (measured on SmolLM2: every turn after the first cut at 512 tokens inside "answer").
_QUERY_CHARS, _ANSWER_CHARS, _QUESTION_CHARS = 300, 300, 4000
SPECS: dict[str, dict[str, Any]] = {
    "perform_comparison": {
        "description": "Compare every answer option with the findings in the question (structured).",
        "parameters": {
            "question": {**_STR, "maxLength": _QUESTION_CHARS},
            "options": {"type": "object", "description": "letter -> option"},
        },
        "required": ["question"],
    },
    "generate_options": {
        "description": "Propose candidate answers to an open-ended question.",
        "parameters": {"question": {**_STR, "maxLength": _QUESTION_CHARS}},
        "required": ["question"],
    },
    "enable_search": {
        "description": "Search the medical literature; the top documents are queued for review.",
        "parameters": {"query": {**_STR, "maxLength": _QUERY_CHARS, "description": "a focused search query"}},
        "required": ["query"],
    },
    "relevance_analysis": {
        "description": "Review the next batch of queued documents and judge whether each is relevant.",
        "parameters": {},
        "required": [],
    },
    "locate_evidence": {
        "description": "Quote the supporting passages of reviewed documents; the quotes are kept in memory.",
        "parameters": {
            "doc_ids": {
                "type": "array",
                "items": {**_STR, "maxLength": 8},
                "maxItems": 8,
                "description": 'e.g. ["D1", "D3"]',
            }
        },
        "required": ["doc_ids"],
    },
    ANSWER_TOOL: {
        "description": "Give the final answer.",
        "parameters": {
            "answer": {**_STR, "maxLength": _ANSWER_CHARS, "description": "option letter, or a short answer"}
        },
        "required": ["answer"],
    },
}

# Which tools each mode offers (the paper's ablations remove tools, never change the loop).
MODE_TOOLS: dict[str, tuple[str, ...]] = {
    "full": ("perform_comparison", "enable_search", "relevance_analysis", "locate_evidence"),
    "no_cache_prune": ("perform_comparison", "enable_search"),
    "no_search": ("perform_comparison",),
}


def tool_names(mode: str, open_ended: bool) -> list[str]:
    """The mode's tools; open-ended questions add ``generate_options`` (paper: built on the same four)."""
    names = list(MODE_TOOLS[mode])
    if open_ended:
        names.insert(0, "generate_options")
    return [*names, ANSWER_TOOL]


# Tools whose arguments default to the question being answered: a constrained call leaves them out, so a
# small model does not spend hundreds of tokens copying the question into the call.
_QUESTION_TOOLS = ("perform_comparison", "generate_options")
# Room for one short thought before each constrained call (the model cannot reason anywhere else).
THOUGHT_CHARS = 300


def call_schema(names: list[str], letters: list[str] | None = None) -> dict[str, Any]:
    """A ``response_format`` that makes one agent turn exactly one call to one of ``names``.

    For backends that follow JSON schemas but not function calling (the CPU llama.cpp model answers
    ``tools=`` with prose): the model still chooses the tool and its arguments, decoding only guarantees
    the shape — the same guided decoding vLLM uses for ``tool_choice="required"``. ``letters`` restricts
    ``final_answer`` to the option letters of a multiple-choice question.
    """
    variants = []
    for n in names:
        params: dict[str, Any] = {} if n in _QUESTION_TOOLS else dict(SPECS[n]["parameters"])
        required: list[str] = [] if n in _QUESTION_TOOLS else list(SPECS[n]["required"])
        if n == ANSWER_TOOL and letters:
            params = {"answer": {"type": "string", "enum": letters}}
        variants.append(
            {
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "maxLength": THOUGHT_CHARS},
                    "name": {"const": n},
                    "arguments": {
                        "type": "object",
                        "properties": params,
                        "required": required,
                        "additionalProperties": False,
                    },
                },
                "required": ["thought", "name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": {"anyOf": variants}}}


def tool_schemas(names: list[str], letters: list[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI ``tools=`` entries for ``names``; ``letters`` restricts ``final_answer`` to the option letters
    of a multiple-choice question (as ``call_schema`` does), so guided decoding cannot write prose there."""

    def params(n: str) -> dict[str, Any]:
        if n == ANSWER_TOOL and letters:
            return {"answer": {"type": "string", "enum": letters, "description": "the option letter"}}
        return SPECS[n]["parameters"]

    return [
        {
            "type": "function",
            "function": {
                "name": n,
                "description": SPECS[n]["description"],
                "parameters": {"type": "object", "properties": params(n), "required": SPECS[n]["required"]},
            },
        }
        for n in names
    ]


@dataclass
class ToolResult:
    """What the model sees (``content``) and what the trace keeps (``summary``)."""

    content: str
    summary: dict[str, Any] = field(default_factory=dict)


async def search_docs(
    retriever: Retriever, reranker: Reranker, query: str, top_r: int, cfg: AgentConfig, rec: Recorder
) -> list[Doc]:
    """TopK per source, then the reranker's TopR; both calls are timed as retrieval."""
    start = time.perf_counter()
    docs = await retriever.retrieve(query, cfg.top_k, sources=cfg.retrieval_sources, mode=cfg.retrieval_mode)
    rec.retrieval(time.perf_counter() - start)
    if not docs:
        return []
    start = time.perf_counter()
    ranked = await reranker.rerank(query, docs, top_r)
    rec.retrieval(time.perf_counter() - start)
    return ranked[:top_r]


class ToolBox:
    """Runs tool calls for one agent; holds no per-question state (that lives in the ``MemoryBank``)."""

    def __init__(
        self,
        llm: ChatModel,
        cfg: AgentConfig,
        mode: str,
        retriever: Retriever | None,
        reranker: Reranker | None,
        json_schema: bool,
    ) -> None:
        self.llm, self.cfg, self.mode = llm, cfg, mode
        self.retriever, self.reranker = retriever, reranker
        self.json_schema = json_schema
        self.prompts = {
            n: load_prompt(f"qa_{n}") for n in ("compare", "generate_options", "relevance", "locate")
        }

    async def run(
        self, name: str, args: dict[str, Any], q: Question, memory: MemoryBank, rec: Recorder
    ) -> ToolResult:
        if name == "perform_comparison":
            return await self._compare(args, q, memory, rec)
        if name == "generate_options":
            return await self._generate(args, q, memory, rec)
        if name == "enable_search":
            return await self._search(args, memory, rec)
        if name == "relevance_analysis":
            return await self._relevance(q, memory, rec)
        if name == "locate_evidence":
            return await self._locate(args, q, memory, rec)
        raise ToolError(f"unknown tool {name!r}")

    async def _ask(self, prompt: str, schema: dict[str, Any], rec: Recorder, **variables: Any) -> Any:
        """A tool's own LLM call; returns the decoded JSON reply, or None when it is not JSON."""
        fmt = None
        if self.json_schema:
            fmt = {"type": "json_schema", "json_schema": {"name": prompt, "strict": True, "schema": schema}}
        resp = await self.llm.chat(
            self.prompts[prompt].render(**variables),
            response_format=fmt,
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            max_tokens=self.cfg.tool_max_tokens,
        )
        rec.llm(resp)
        fence = re.search(r"```(?:json)?\s*(.*?)```", resp.content, re.S)
        value, err = decode_json(fence.group(1) if fence else resp.content)
        return None if err else value

    def _options(self, q: Question, memory: MemoryBank) -> dict[str, str] | None:
        if q.options and not self.cfg.open_ended:
            return dict(q.options)
        return {str(i): c for i, c in enumerate(memory.candidates, 1)} or None

    async def _compare(
        self, args: dict[str, Any], q: Question, memory: MemoryBank, rec: Recorder
    ) -> ToolResult:
        question = text_arg(args, "question", default=q.text)
        # Multiple choice compares the real options (a model-written list could drop or invent one);
        # open-ended compares the model's own candidates.
        options = self._options(q, memory)
        given = args.get("options")
        if options is None or (self.cfg.open_ended and given):
            options = options_arg(given)
        if not options:
            raise ToolError("no options to compare: call generate_options first, or pass options")
        schema = _obj(comparison=_arr(_obj(option=_STR, supporting=_STR, against=_STR, verdict=_STR)))
        value = await self._ask("compare", schema, rec, question=question, options=options)
        rows = value.get("comparison") if isinstance(value, dict) else value
        if not isinstance(rows, list) or not rows:
            return ToolResult("The comparison could not be produced.", {"rows": 0})
        lines = [
            f"({r.get('option', '?')}) {r.get('verdict', '?')}: for: {r.get('supporting', '')}; "
            f"against: {r.get('against', '')}"
            for r in rows
            if isinstance(r, dict)
        ]
        return ToolResult("Comparison:\n" + "\n".join(lines), {"rows": len(lines)})

    async def _generate(
        self, args: dict[str, Any], q: Question, memory: MemoryBank, rec: Recorder
    ) -> ToolResult:
        question = text_arg(args, "question", default=q.text)
        schema = _obj(options=_arr(_STR))
        value = await self._ask(
            "generate_options", schema, rec, question=question, n_options=self.cfg.n_options
        )
        items = value.get("options") if isinstance(value, dict) else value
        found = (
            [s.strip() for s in items if isinstance(s, str) and s.strip()] if isinstance(items, list) else []
        )
        for c in found:
            if c not in memory.candidates:
                memory.candidates.append(c)
        if not found:
            return ToolResult("No candidate answers could be produced.", {"candidates": 0})
        listing = "\n".join(f"({i}) {c}" for i, c in enumerate(memory.candidates, 1))
        return ToolResult("Candidate answers:\n" + listing, {"candidates": len(found)})

    async def _search(self, args: dict[str, Any], memory: MemoryBank, rec: Recorder) -> ToolResult:
        if self.retriever is None or self.reranker is None:
            raise ToolError("search is not available")
        query = text_arg(args, "query")
        if query.casefold() in (s.casefold() for s in memory.searches):
            raise ToolError(
                f"{query!r} was already searched; review the queued documents or search differently"
            )
        memory.searches.append(query)
        docs = await search_docs(self.retriever, self.reranker, query, self.cfg.top_r, self.cfg, rec)
        handles, duplicates = memory.enqueue(docs)
        summary = {"retrieved": len(docs), "new": handles, "duplicates": duplicates}
        if self.mode == "no_cache_prune":
            # The ablation without the memory bank: the results go straight into the conversation.
            shown = [(h, memory.doc(h)) for h in handles]
            for h, d in shown:
                memory.add_context(h, d.content[: self.cfg.doc_max_chars])
            body = documents_block(shown, self.cfg.doc_max_chars) if shown else "No new documents."
            return ToolResult(f"Search results for {query!r}:\n{body}", summary)
        if not handles:
            return ToolResult(f"No new documents for {query!r}; try another query.", summary)
        return ToolResult(
            f"{len(handles)} documents queued ({duplicates} already seen); {len(memory.queue)} await review. "
            f"Call relevance_analysis to review the next {memory.batch_size} "
            f"({memory.batches_left} batches left).",
            summary,
        )

    async def _relevance(self, q: Question, memory: MemoryBank, rec: Recorder) -> ToolResult:
        if memory.batches_left == 0:
            raise ToolError(f"all {memory.max_batches} review batches are used; give your final answer")
        batch = memory.next_batch()
        if not batch:
            raise ToolError("no documents await review; call enable_search first")
        docs = [(h, memory.doc(h)) for h in batch]
        schema = _obj(judgements=_arr(_obj(id=_STR, relevant={"type": "boolean"}, reason=_STR)))
        value = await self._ask(
            "relevance",
            schema,
            rec,
            question=q.text,
            options=self._options(q, memory),
            documents=documents_block(docs, self.cfg.doc_max_chars),
        )
        verdicts = judgements(value, batch)
        lines = []
        for h, d in docs:
            relevant, reason = verdicts.get(h, (None, ""))
            memory.judge(Judgement(h, relevant, reason))
            label = {True: "relevant", False: "not relevant", None: "no verdict"}[relevant]
            note = f": {escape_data(reason)}" if reason else ""
            lines.append(f'{h} [{escape_data(d.source)}] "{escape_data(d.title)}": {label}{note}')
        content = (
            f"Batch {memory.batches_reviewed} of at most {memory.max_batches}:\n"
            + "\n".join(lines)
            + "\nCall locate_evidence with the ids of the relevant documents to keep their evidence; "
            f"documents not quoted are discarded when the next batch opens. {len(memory.queue)} documents "
            f"still queued."
        )
        return ToolResult(
            content, {"batch": batch, "relevant": [h for h in batch if verdicts.get(h, (None,))[0]]}
        )

    async def _locate(
        self, args: dict[str, Any], q: Question, memory: MemoryBank, rec: Recorder
    ) -> ToolResult:
        wanted = doc_handles(args.get("doc_ids", args.get("ids", args.get("doc_id"))))
        if not wanted:
            raise ToolError('doc_ids must list document ids, e.g. {"doc_ids": ["D1", "D3"]}')
        done = [h for h in wanted if h in memory.grounded]
        if done and len(done) == len(wanted):
            # A small model at temperature 0 asks for the same quotes again and again: refuse without a call.
            nxt = "relevance_analysis for the next batch" if memory.batches_left else "final_answer"
            raise ToolError(f"{', '.join(done)} already quoted (the evidence is in memory); call {nxt}")
        wanted = [h for h in wanted if h not in done]
        ok = [h for h in wanted if memory.is_reviewable(h)]
        if not ok:
            raise ToolError(
                f"cannot quote {wanted}: only documents of the batch under review can be quoted "
                f"({memory.pending or 'none; call relevance_analysis'})"
            )
        docs = [(h, memory.doc(h)) for h in ok]
        schema = _obj(evidence=_arr(_obj(id=_STR, quote=_STR)))
        value = await self._ask(
            "locate",
            schema,
            rec,
            question=q.text,
            options=self._options(q, memory),
            documents=documents_block(docs, self.cfg.doc_max_chars),
        )
        cached: list[Evidence] = []
        unverified: list[Evidence] = []
        for h, quote in quotes(value, ok):
            ev = memory.cache(h, quote, verify_quote(quote, memory.doc(h)))
            (cached if ev.verified else unverified).append(ev)
        parts = [f"Cached evidence:\n{evidence_block(cached)}" if cached else "No evidence was cached."]
        if unverified:
            listing = "; ".join(f"{e.handle}: {escape_data(e.quote[:200])!r}" for e in unverified)
            parts.append(f"Not found verbatim in the documents, so not kept: {listing}")
        skipped = [h for h in wanted if h not in ok]
        if skipped:
            parts.append(f"Not quotable (not in the batch under review): {', '.join(skipped)}")
        summary = {"docs": ok, "cached": len(cached), "unverified": len(unverified), "skipped": skipped}
        return ToolResult("\n".join(parts), summary)


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}
