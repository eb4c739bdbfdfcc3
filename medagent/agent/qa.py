"""The QA paper's evidence-grounded, tool-using QA agent (modes ``full``, ``no_cache_prune``, ``no_search``).

The model picks its tools by function calling; nothing is scripted. Each turn is read by
``toolcalls.parse_reply``; the model's mistakes (malformed or unknown calls, bad arguments, empty or
cut-off replies, an answer written next to a tool call) come back to it as observations and the loop goes
on, within ``AgentConfig.step_budget()`` turns and ``max_conversation_tokens`` tokens. The answer is then a last call
conditioned on the conversation plus the memory bank's cached evidence (JSON-schema constrained for
multiple choice when the backend supports it); an unparseable answer is ``INVALID``. ``LLMError`` and
bugs propagate: the caller records the former against the question.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from medagent.agent.answers import answer_schema, parse_choice, parse_json_object
from medagent.agent.base import register_agent
from medagent.agent.episode import Episode, FinalAnswer, MemorySnapshot, ModelTurn, Observation, ToolStep
from medagent.agent.memory import BANK_KINDS, MemoryBank
from medagent.agent.provenance import snapshot_fields
from medagent.agent.render import documents_block, evidence_block
from medagent.agent.services import AgentDeps, Reranker, Retriever
from medagent.agent.toolargs import ToolError
from medagent.agent.toolcalls import ParsedReply, parse_reply
from medagent.agent.tools import (
    ANSWER_TOOL,
    TOOLS,
    ToolContext,
    call_schema,
    mode_tools,
    run_tool,
    searches,
    tool_names,
    tool_schemas,
)
from medagent.agent.trace import preview
from medagent.config import AgentConfig
from medagent.llm.base import ChatModel
from medagent.prompts import load_feedback, load_prompt
from medagent.types import INVALID, Prediction, Question

# What is kept of a cut-off reply in the conversation: enough to show the model where it went wrong.
KEPT_REPLY_CHARS = 600


def bank_block(memory: MemoryBank, max_chars: int) -> str:
    """The memory bank as the final answer reads it: the grounded documents when the bank keeps them,
    else the verified quotes."""
    if memory.keep_documents:
        return documents_block(memory.grounded_documents(), max_chars)
    return evidence_block(memory.evidence)


@dataclass
class QAEpisode(Episode):
    """One ``answer()`` call: its typed steps (the conversation and the trace), plus the question's state;
    the agent object itself stays stateless."""

    question: Question = field(default_factory=lambda: Question("", "", None, ""))
    memory: MemoryBank = field(default_factory=lambda: MemoryBank(""))
    options: dict[str, str] | None = None
    tools: list[str] = field(default_factory=list)
    # (tool, arguments) of the last call run: an identical repeat is refused, not run again.
    last_call: tuple[str, str] | None = None
    # response_format of each agent turn when calls are constrained (``tools.call_schema``).
    call_format: dict[str, Any] | None = None


class QAAgent:
    """The tool-using agent of the QA paper.

    Args:
        llm: Chat model for the agent's turns and the tools' own calls.
        cfg: Agent configuration (``mode`` picks the tool set).
        retriever: First-stage retrieval; required by modes that search.
        reranker: Second-stage reranking; required by modes that search.
        json_schema: The backend honours ``response_format`` JSON schemas.
        constrained_calls: Each agent turn is decoded under ``tools.call_schema`` (one call, chosen by
            the model) instead of free function calling; for backends without a tool-call parser.
        tool_choice: ``tool_choice`` of native agent turns (``llm.tool_choice``: ``auto``, or ``required``
            for a small model on vLLM, whose guided decoding then returns a real call every turn).
    """

    def __init__(
        self,
        llm: ChatModel,
        cfg: AgentConfig,
        *,
        retriever: Retriever | None = None,
        reranker: Reranker | None = None,
        json_schema: bool = True,
        constrained_calls: bool = False,
        tool_choice: str | None = None,
    ) -> None:
        if searches(cfg) and (retriever is None or reranker is None):
            raise ValueError(f"agent mode {cfg.mode!r} needs deps.retriever and deps.reranker")
        self.llm, self.cfg = llm, cfg
        self.json_schema = json_schema and cfg.answer.constrained_answer
        self.constrained_calls = constrained_calls and json_schema
        self.tool_choice = tool_choice
        self.retriever, self.reranker = retriever, reranker
        # Tools decode their own calls under a schema whenever the backend can (their replies are data).
        self.tools_json_schema = json_schema
        self.memory_kind = mode_tools(cfg)[1]
        self.prompt = load_prompt("qa_agent")
        self.prompt_final = load_prompt("qa_final")
        self.feedback = load_feedback("qa_agent")

    def new_memory(self, question: Question) -> MemoryBank:
        """An empty memory bank sized by the config (the actor may keep it by question id)."""
        return MemoryBank(
            question.id,
            batch_size=self.cfg.loop.batch_size,
            top_r=self.cfg.retrieval.top_r,
            keep_documents=self.memory_kind == "documents",
        )

    async def answer(self, question: Question, memory: MemoryBank | None = None) -> Prediction:
        """Answers one question; ``memory`` (filled in place) is created when not given."""
        start = time.perf_counter()
        memory = memory if memory is not None else self.new_memory(question)
        open_ended = self.cfg.open_ended or not question.options
        names = tool_names(self.cfg, open_ended)
        options = None if open_ended else question.options
        messages = self.prompt.render(
            question=question.text,
            options=options,
            tools=[
                {"name": n, "description": tool_schemas([n])[0]["function"]["description"]} for n in names
            ],
            search=self.memory_kind in BANK_KINDS,
            keep=self.memory_kind,
            batch_size=memory.batch_size,
            max_batches=memory.max_batches,
            open_ended=open_ended,
        )
        schemas = tool_schemas(names, sorted(options) if options else None)
        run = QAEpisode(
            prompt=list(messages),
            schemas=schemas,
            question=question,
            memory=memory,
            options=options,
            tools=names,
        )
        if self.constrained_calls:
            run.call_format = call_schema(
                names, sorted(options) if options else None, thought_chars=self.cfg.loop.thought_chars
            )
        try:
            candidate, reason = await self._loop(run)
            answer, raw = await self._final(run, candidate, reason)
        finally:
            memory.finish()
        run.add(MemorySnapshot(snapshot_fields(memory.summary(), memory.judgements, run.trace())))
        return Prediction(
            id=question.id,
            benchmark=question.benchmark,
            answer=answer,
            raw=raw,
            trace=run.trace(),
            evidence=memory.records(),
            usage=run.usage(),
            latency_s=time.perf_counter() - start,
        )

    async def _loop(self, run: QAEpisode) -> tuple[str | None, str]:
        """Agent turns until the model answers; returns (its answer or None, why the loop ended)."""
        for turn in range(self.cfg.step_budget()):
            if (
                run.tokens(run.messages) + self.cfg.loop.step_max_tokens
                > self.cfg.loop.max_conversation_tokens
            ):
                return None, "token_budget"
            sent = list(run.messages)
            resp = await self.llm.chat(
                sent,
                tools=None if self.constrained_calls else run.schemas,
                tool_choice=None if self.constrained_calls else self.tool_choice,
                response_format=run.call_format if self.constrained_calls else None,
                temperature=self.cfg.sampling.temperature,
                top_p=self.cfg.sampling.top_p,
                max_tokens=self.cfg.loop.step_max_tokens,
                prompt=self.prompt.name,
            )
            run.calibrate(sent, resp)
            parsed = parse_reply(resp, f"call_{turn}", ANSWER_TOOL)
            cut = resp.finish_reason == "length"
            content = resp.content if not cut else resp.content[:KEPT_REPLY_CHARS] + " [cut off]"
            run.add(ModelTurn(content, run.llm(resp), list(parsed.calls), reply=resp.content))
            if parsed.calls:
                answer = await self._calls(run, parsed)
                if answer is not None:
                    return answer, "model"
                continue
            if parsed.malformed:
                self._observe(run, "malformed", detail=parsed.malformed)
            elif cut:
                self._observe(run, "overlong")
            elif not parsed.text:
                self._observe(run, "empty")
            else:
                answer = self._read(parsed.text, run.options)
                if answer != INVALID:
                    return answer, "model"
                self._observe(run, "no_answer")
        return None, "max_steps"

    async def _calls(self, run: QAEpisode, parsed: ParsedReply) -> str | None:
        """Runs the reply's calls in order; returns the answer if the reply was a lone final_answer."""
        answer: str | None = None
        text_results: list[str] = []
        tools_called = [c for c in parsed.calls if c.name != ANSWER_TOOL]
        for i, call in enumerate(parsed.calls):
            start = time.perf_counter()
            before = run.snapshot()
            ok, summary, executed = False, {}, False
            say = self.feedback.text
            if call.error:
                content = say("bad_arguments", error=call.error, tool=call.name)
            elif call.name == ANSWER_TOOL and tools_called:
                content = say("answer_with_calls")
            elif call.name == ANSWER_TOOL:
                answer = self._read(_answer_arg(call.arguments), run.options)
                ok = answer != INVALID
                content = say("answer_recorded") if ok else self._answer_help(run)
                answer = answer if ok else None
            elif i >= self.cfg.loop.max_calls_per_step:
                content = say("too_many_calls", limit=self.cfg.loop.max_calls_per_step)
            elif not _repeatable(call.name) and (call.name, _key(call.arguments)) == run.last_call:
                content = say("repeat", tool=call.name)
            elif call.name not in run.tools:
                content = say("unknown_tool", tool=call.name, tools=run.tools)
            else:
                run.tool_calls += 1
                executed = True
                run.last_call = (call.name, _key(call.arguments))
                try:
                    result = await run_tool(call.name, self._context(run), call.arguments)
                    ok, content, summary = True, result.content, result.summary
                except ToolError as exc:
                    content = say("tool_error", error=exc)
            run.add(
                ToolStep(call, content, ok, executed, summary, time.perf_counter() - start, run.delta(before))
            )
            if call.origin != "native":
                # A call written in the text gets its result the same way: as text, in a delimited block.
                text_results.append(self.feedback.text("tool_result", tool=call.name, content=content))
        if text_results:
            run.add(Observation("\n\n".join(text_results)))
        if tools_called and parsed.text and self._read(parsed.text, run.options) != INVALID:
            self._observe(run, "answer_with_call")
        return answer

    def _context(self, run: QAEpisode) -> ToolContext:
        return ToolContext(
            question=run.question, memory=run.memory, rec=run, llm=self.llm, cfg=self.cfg,
            memory_kind=self.memory_kind, retriever=self.retriever, reranker=self.reranker,
            json_schema=self.tools_json_schema,
        )  # fmt: skip

    def _observe(self, run: QAEpisode, kind: str, **fields: str) -> None:
        run.add(Observation(self.feedback.text(kind, open_ended=run.options is None, **fields), error=kind))

    def _answer_help(self, run: QAEpisode) -> str:
        letters = list(run.options or {})
        return self.feedback.text("bad_answer", open_ended=run.options is None, letters=letters)

    def _read(self, text: str, options: dict[str, str] | None) -> str:
        return read_answer(text, options)

    async def _final(self, run: QAEpisode, candidate: str | None, reason: str) -> tuple[str, str]:
        """The answer: the model's own (``fallback``) or a last call on conversation + memory bank."""
        if candidate is not None and self.cfg.answer.final_answer_call == "fallback":
            run.add(FinalAnswer({"reason": reason, "source": "model", "answer": candidate}))
            return candidate, candidate
        prompt = self.prompt_final.render(
            memory=self.memory_kind in BANK_KINDS,
            keep=self.memory_kind,
            evidence=bank_block(run.memory, self.cfg.loop.doc_max_chars),
            question=run.question.text,
            options=run.options,
        )
        limit = self.cfg.loop.max_conversation_tokens - self.cfg.sampling.max_tokens
        messages = fit_messages(run.messages, prompt, limit, run)
        constrained = run.options is not None and self.json_schema
        # The model's own committed answer stands in for an unreadable last call before any retry.
        tries = self.cfg.answer_sampling() if candidate is None else self.cfg.answer_sampling()[:1]
        for i, (temperature, top_p) in enumerate(tries):
            resp = await self.llm.chat(
                messages,
                response_format=answer_schema(sorted(run.options)) if constrained and run.options else None,
                temperature=temperature,
                top_p=top_p,
                max_tokens=self.cfg.sampling.max_tokens,
                prompt=self.prompt_final.name,
            )
            answer = self._read(resp.content, run.options)
            source = "final_call"
            if answer == INVALID and candidate is not None:
                # The last call was unreadable but the model had committed to an answer in the loop.
                answer, source = candidate, "model"
            last = answer != INVALID or i == len(tries) - 1
            fields = {
                **run.llm(resp), "reason": reason, "source": source, "constrained": constrained, "answer": answer,
                "content": preview(resp.content), **({"retry": True} if i else {}),  # the QA paper's re-run
            }  # fmt: skip
            run.add(FinalAnswer(fields, kind="final_answer" if last else "invalid_answer"))
            if last:
                break
        return answer, resp.content


def read_answer(text: str, options: dict[str, str] | None) -> str:
    """An option letter (multiple choice) or a short free-text answer; ``INVALID`` when there is none."""
    if options is not None:
        return parse_choice(text, options)
    obj = parse_json_object(text)
    if obj is not None:
        value = obj.get("answer", obj.get("final_answer"))
        return value.strip() if isinstance(value, str) and value.strip() else INVALID
    return text.strip().strip("`").strip() or INVALID


def _answer_arg(args: dict[str, Any]) -> str:
    value = args.get("answer", args.get("final_answer", args.get("choice", args.get("option"))))
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    return value if isinstance(value, str) else "" if value is None else str(value)


def fit_messages(
    messages: list[dict[str, Any]], tail: list[dict[str, str]], limit: int, run: Episode
) -> list[dict[str, Any]]:
    """``messages + tail`` cut to ``limit`` estimated tokens: the longest middle message is shortened first.

    The instructions, the question and the final prompt (with the memory bank) are never cut.
    """
    out = [dict(m) for m in messages] + list(tail)
    head, last = 2, len(out) - len(tail)
    cut: set[int] = set()  # each message is cut once, so the loop ends
    while (excess := run.tokens(out, with_tools=False) - limit) > 0:
        middle = [i for i in range(head, last) if i not in cut and len(out[i].get("content") or "") > 200]
        if not middle:
            break
        i = max(middle, key=lambda k: len(out[k]["content"]))
        text = out[i]["content"]
        keep = max(200, len(text) - math.ceil(excess / run.tpc) - 64)
        out[i]["content"] = text[:keep] + " [cut to fit the context budget]"
        cut.add(i)
    return out


def _repeatable(name: str) -> bool:
    """An identical repeat does new work (relevance_analysis opens the next batch each time)."""
    return name in TOOLS and TOOLS.get(name).repeatable


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


def _factory(llm: ChatModel, cfg: AgentConfig, deps: AgentDeps) -> QAAgent:
    return QAAgent(
        llm,
        cfg,
        retriever=deps.retriever,
        reranker=deps.reranker,
        json_schema=deps.json_schema,
        constrained_calls=deps.tool_calls == "json_schema",
        tool_choice=deps.tool_choice,
    )


for _mode in ("full", "no_cache_prune", "no_search"):
    register_agent(_mode, retrieval=searches)(_factory)
